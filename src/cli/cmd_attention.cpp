// `minivit attention`: what a checkpoint looks at in one image. Writes the raw softmax
// weights of every layer and head, the attention rollout, pictures of both, a summary and
// an index.html that shows them together.
#include <cstdio>

#include "minivit/cli/commands.h"
#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/core/progress.h"
#include "minivit/data/data.h"
#include "minivit/data/image_io.h"
#include "minivit/formats/checkpoint.h"
#include "minivit/formats/npy.h"
#include "minivit/inspect/attention_maps.h"
#include "minivit/kernels/threads.h"
#include "minivit/train/splits.h"

namespace minivit {

struct SourceImage {
  Image8 pixels;                  // (C, S, S) at the model's channels and size
  nlohmann::ordered_json source;  // where it came from, for summary.json
  std::string label;              // true class name when known
};

static SourceImage image_from_file(const std::string& path, const Config& config) {
  LoadedImage img = load_image_file(path, config.model.channels, config.model.image_size);
  SourceImage out;
  out.pixels = std::move(img.pixels);
  out.source = {{"file", path},
                {"file_size", {img.file_width, img.file_height}},
                {"file_channels", img.file_channels}};
  return out;
}

// Image N of a split of the data the checkpoint was trained on, picked the way eval picks
// its images, so "--split val --index 3" is the fourth validation image of that run.
static SourceImage image_from_dataset(const Checkpoint& ckpt, Split split, int64_t n) {
  const Config& config = ckpt.config;
  const std::string name = split_name(split);
  DataSplits data = load_data(config.data, config.model);
  const SplitImages images = images_of_split(data, split, config);
  const Dataset& set = images.dataset;
  const std::vector<int64_t>& indices = images.indices;
  check_data_fits_model(set, config.model, config.data.path + " (" + name + " split)");
  if (n >= int64_t(indices.size()))
    throw Error("--index " + std::to_string(n) + ": the " + name + " split of " + config.data.path +
                " has " + std::to_string(indices.size()) + " images" +
                (indices.empty() ? "" : " (index 0 to " + std::to_string(indices.size() - 1) + ")"));
  const int64_t i = indices[size_t(n)];
  SourceImage out;
  const size_t len = size_t(set.channels()) * size_t(set.height()) * size_t(set.width());
  out.pixels = Image8::from_shape({size_t(set.channels()), size_t(set.height()), size_t(set.width())});
  std::copy_n(set.images.data() + size_t(i) * len, len, out.pixels.data());
  const int label = set.labels[size_t(i)];
  out.label = class_names_for(ckpt.class_names, config.model.num_classes)[size_t(label)];
  out.source = {{"dataset", config.data.path}, {"split", name}, {"index", n},
                {"dataset_index", i}, {"label", out.label}, {"label_index", label}};
  return out;
}

int run_attention(const AttentionOptions& opt) {
  const bool by_file = !opt.image.empty(), by_index = opt.index >= 0;
  if (by_file && by_index) throw Error("give --image FILE or --index N, not both");
  if (!by_file && !by_index) throw Error("no input image: give --image FILE or --index N");
  if (by_file && !opt.split.empty())
    throw Error("--split " + opt.split + ": --split chooses the split for --index, not for --image");
  const Split split = parse_split(opt.split.empty() ? "test" : opt.split, "--split");
  const Fusion fusion = parse_fusion(opt.fusion, "--fusion");
  if (!(opt.discard >= 0.0 && opt.discard <= 1.0))
    throw Error("--discard " + strprintf("%g", opt.discard) + ": expected a fraction from 0 to 1");
  if (opt.out_dir.empty()) throw Error("--out: give the directory to write the maps to");

  Checkpoint ckpt = load_checkpoint(opt.checkpoint);
  const Config& config = ckpt.config;
  set_num_threads(config.train.threads);
  // Load the input before creating the output directory, so a bad input leaves nothing behind.
  SourceImage img = by_file ? image_from_file(opt.image, config) : image_from_dataset(ckpt, split, opt.index);
  ensure_writable_dir(opt.out_dir);

  const std::vector<float> input = normalise_image(img.pixels, config.data.mean, config.data.std);
  const AttentionMaps maps = collect_attention(*ckpt.model, input.data());
  const Tensor2 rollout = attention_rollout(maps.att, maps.pool, fusion, opt.discard);

  img.source["checkpoint"] = opt.checkpoint;
  img.source["step"] = ckpt.progress.step;
  SummaryInputs in;
  in.maps = &maps;
  in.rollout = &rollout;
  in.class_names = &ckpt.class_names;
  in.fusion = fusion;
  in.discard = opt.discard;
  in.source = img.source;
  const nlohmann::ordered_json summary = attention_summary(in);

  // The pictures show the input as the model saw it: its float input, denormalised.
  const ModelConfig& m = config.model;
  const Image8 seen = denormalise_image(input.data(), m.channels, m.image_size, config.data.mean, config.data.std);
  const std::string predicted = summary["prediction"]["class"].get<std::string>();
  const double probability = summary["prediction"]["probability"].get<double>();
  std::string headline = strprintf("predicted %s (%.1f%%)", predicted.c_str(), 100.0 * probability);
  if (!img.label.empty()) headline += ", label " + img.label;

  const std::string dir = opt.out_dir + "/";
  const std::vector<int64_t> att_shape(maps.att.shape().begin(), maps.att.shape().end());
  write_npy(dir + "attention.npy", maps.att.data(), att_shape);
  write_npy(dir + "rollout.npy", rollout.data(), {int64_t(rollout.shape(0)), int64_t(rollout.shape(1))});
  write_npy(dir + "input.npy", input.data(), {m.channels, m.image_size, m.image_size});
  write_png(dir + "input.png", render_input(seen));
  const std::string grid_title =
      maps.pool == PoolKind::cls ? "CLS attention per layer and head: " : "Mean attention per layer and head: ";
  write_png(dir + "grid.png", render_grid(seen, maps.att, maps.pool, grid_title + headline));
  write_png(dir + "rollout.png",
            render_rollout(seen, rollout, maps.pool, headline,
                           strprintf("heads fused by %s; ", fusion_name(fusion)) +
                               (opt.discard > 0 ? strprintf("lowest %g%% of the weights discarded", 100 * opt.discard)
                                                : std::string("nothing discarded"))));
  write_file_atomic(dir + "summary.json", summary.dump(2) + "\n");
  write_file_atomic(dir + "index.html", render_index_html(summary));

  std::printf("%s: %s\n", by_file ? opt.image.c_str() : strprintf("%s split, image %lld", split_name(split), (long long)opt.index).c_str(),
              headline.c_str());
  std::printf("attention.npy [%d, %d, %d, %d], rollout.npy [%d, %d], pictures and summary.json in %s\n"
              "open %sindex.html to see them\n",
              m.depth, m.heads, m.tokens(), m.tokens(), m.grid(), m.grid(), opt.out_dir.c_str(), dir.c_str());
  return 0;
}

}  // namespace minivit
