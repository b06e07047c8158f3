// `minivit attention`: what a checkpoint looks at, and why it chose its class. For each
// image: the raw softmax weights of every layer and head, attention rollout, the
// class-specific gradient rollout from the model's own backward, pictures, a summary and
// an explorer page. For several images (--count, or several --image) one folder each and
// a gallery; with --stats the attention distance and entropy per layer and head over the
// images (or over the whole split).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "minivit/cli/commands.h"
#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/core/progress.h"
#include "minivit/data/data.h"
#include "minivit/data/image_io.h"
#include "minivit/formats/checkpoint.h"
#include "minivit/formats/config_file.h"
#include "minivit/formats/npy.h"
#include "minivit/inspect/attention_maps.h"
#include "minivit/inspect/attention_stats.h"
#include "minivit/inspect/explorer.h"
#include "minivit/inspect/grad_rollout.h"
#include "minivit/kernels/threads.h"
#include "minivit/train/splits.h"

namespace minivit {
namespace {

struct SourceImage {
  Image8 pixels;                  // (C, S, S) at the model's channels and size
  nlohmann::ordered_json source;  // where it came from, for summary.json
  std::string name;               // for the gallery: "test 17" or the file's name
  std::string folder;             // its folder under --out when there are several
  std::string label;              // true class name when known
  int label_index = -1;
};

SourceImage image_from_file(const std::string& path, const Config& config) {
  LoadedImage img = load_image_file(path, config.model.channels, config.model.image_size);
  SourceImage out;
  out.pixels = std::move(img.pixels);
  out.source = {{"file", path},
                {"file_size", {img.file_width, img.file_height}},
                {"file_channels", img.file_channels}};
  out.name = std::filesystem::path(path).filename().string();
  return out;
}

// A split of the data the checkpoint was trained on, picked the way eval picks its images,
// so "--split val --index 3" is the fourth validation image of that run.
struct SplitSource {
  DataSplits data;
  std::optional<SplitImages> images;
  std::string name;
};

std::unique_ptr<SplitSource> open_split(const Checkpoint& ckpt, Split split) {
  const Config& config = ckpt.config;
  auto s = std::make_unique<SplitSource>();
  s->name = split_name(split);
  s->data = load_data(config.data, config.model);
  s->images.emplace(images_of_split(s->data, split, config));
  check_data_fits_model(s->images->dataset, config.model, config.data.path + " (" + s->name + " split)");
  return s;
}

SourceImage image_from_split(const Checkpoint& ckpt, const SplitSource& split, int64_t n) {
  const Dataset& set = split.images->dataset;
  const std::vector<int64_t>& indices = split.images->indices;
  if (n >= int64_t(indices.size()))
    throw Error("--index " + std::to_string(n) + ": the " + split.name + " split of " + ckpt.config.data.path +
                " has " + std::to_string(indices.size()) + " images" +
                (indices.empty() ? "" : " (index 0 to " + std::to_string(indices.size() - 1) + ")"));
  const int64_t i = indices[size_t(n)];
  SourceImage out;
  const size_t len = size_t(set.channels()) * size_t(set.height()) * size_t(set.width());
  out.pixels = Image8::from_shape({size_t(set.channels()), size_t(set.height()), size_t(set.width())});
  std::copy_n(set.images.data() + size_t(i) * len, len, out.pixels.data());
  out.label_index = set.labels[size_t(i)];
  out.label = class_names_for(ckpt.class_names, ckpt.config.model.num_classes)[size_t(out.label_index)];
  out.source = {{"dataset", ckpt.config.data.path}, {"split", split.name}, {"index", n},
                {"dataset_index", i}, {"label", out.label}, {"label_index", out.label_index}};
  out.name = split.name + " " + std::to_string(n);
  out.folder = strprintf("%s_%05lld", split.name.c_str(), (long long)n);
  return out;
}

std::string source_text(const nlohmann::ordered_json& in) {
  std::string s = in.contains("file")
                      ? "image " + in["file"].get<std::string>()
                      : in["split"].get<std::string>() + " split image " + std::to_string(in["index"].get<int64_t>()) +
                            " of " + in["dataset"].get<std::string>();
  return s + "; checkpoint " + in["checkpoint"].get<std::string>() + ", step " +
         std::to_string(in["step"].get<int64_t>());
}

// Everything of one image into `dir`; returns its gallery entry.
GalleryItem write_image_folder(ViT& model, const Checkpoint& ckpt, SourceImage& img, const std::string& dir,
                               const AttentionOptions& opt, Fusion fusion, AttentionStats* stats) {
  const Config& config = ckpt.config;
  const ModelConfig& m = config.model;
  const std::vector<float> input = normalise_image(img.pixels, config.data.mean, config.data.std);
  const Explanation e = explain_class(model, input.data(), opt.class_index);
  const AttentionMaps& maps = e.maps;
  const Tensor2 rollout = attention_rollout(maps.att, maps.pool, fusion, opt.discard);
  if (stats) {
    for (int l = 0; l < m.depth; ++l)
      stats->add_layer(l, maps.att.data() + size_t(l) * m.heads * m.tokens() * m.tokens());
    stats->count_image();
  }
  const std::vector<std::string> names = class_names_for(ckpt.class_names, m.num_classes);

  img.source["checkpoint"] = opt.checkpoint;
  img.source["step"] = ckpt.progress.step;
  SummaryInputs in;
  in.maps = &maps;
  in.rollout = &rollout;
  in.class_names = &ckpt.class_names;
  in.fusion = fusion;
  in.discard = opt.discard;
  in.source = img.source;
  nlohmann::ordered_json summary = attention_summary(in);
  const std::string explained = names[size_t(e.class_index)];
  summary["grad_rollout"] = {
      {"class", explained},
      {"class_index", e.class_index},
      {"chosen_by", opt.class_index >= 0 ? "--class" : "prediction"},
      {"definition",
       "per layer the heads' mean of max(0, A * d logit / d A), A the attention after the softmax "
       "(evaluation mode); identity added, rows renormalised to 1, layers multiplied from the first to "
       "the last; read as the rollout is"},
      {"top_patches", patches_json(top_patches(e.grad_rollout.data(), m.grid(), 5))}};

  // The pictures show the input as the model saw it: its float input, denormalised.
  const Image8 seen = denormalise_image(input.data(), m.channels, m.image_size, config.data.mean, config.data.std);
  const std::string predicted = summary["prediction"]["class"].get<std::string>();
  const double probability = summary["prediction"]["probability"].get<double>();
  std::string headline = strprintf("predicted %s (%.1f%%)", predicted.c_str(), 100.0 * probability);
  if (!img.label.empty()) headline += ", label " + img.label;

  ExplorerPage page;
  page.explanation = &e;
  page.seen = &seen;
  page.model = &m;
  page.class_names = &names;
  page.fusion = fusion;
  page.discard = opt.discard;
  page.label = img.label_index;
  page.title = headline;
  page.source = source_text(img.source);
  page.attention_form = std::string(config_name(m.attention));
  const std::string html = render_explorer_html(page);

  ensure_writable_dir(dir);
  const std::string d = dir + "/";
  const std::vector<int64_t> att_shape(maps.att.shape().begin(), maps.att.shape().end());
  const std::vector<int64_t> grid_shape = {m.grid(), m.grid()};
  write_npy(d + "attention.npy", maps.att.data(), att_shape);
  write_npy(d + "rollout.npy", rollout.data(), grid_shape);
  write_npy(d + "grad_rollout.npy", e.grad_rollout.data(), grid_shape);
  write_npy(d + "input.npy", input.data(), {m.channels, m.image_size, m.image_size});
  write_png(d + "input.png", render_input(seen));
  const std::string grid_title =
      maps.pool == PoolKind::cls ? "CLS attention per layer and head: " : "Mean attention per layer and head: ";
  write_png(d + "grid.png", render_grid(seen, maps.att, maps.pool, grid_title + headline));
  write_png(d + "rollout.png",
            render_rollout(seen, rollout, maps.pool, headline,
                           strprintf("heads fused by %s; ", fusion_name(fusion)) +
                               (opt.discard > 0 ? strprintf("lowest %g%% of the weights discarded", 100 * opt.discard)
                                                : std::string("nothing discarded"))));
  write_png(d + "grad_rollout.png",
            render_rollout(seen, e.grad_rollout, maps.pool, headline,
                           "class-specific gradient rollout of " + explained));
  write_png(d + "thumb.png", render_thumbnail(seen, e.grad_rollout));
  write_file_atomic(d + "summary.json", summary.dump(2) + "\n");
  write_file_atomic(d + "index.html", html);

  GalleryItem item;
  item.dir = img.folder;
  item.name = img.name;
  item.label = img.label;
  item.predicted = predicted;
  item.probability = probability;
  item.misclassified = img.label_index >= 0 && img.label_index != summary["prediction"]["index"].get<int>();
  return item;
}

// Attention statistics over every image of a split: evaluation forwards in batches.
void stats_over_split(const ViT& model, const Config& config, const SplitSource& split, AttentionStats& stats) {
  const ModelConfig& m = config.model;
  const Dataset& set = split.images->dataset;
  const std::vector<int64_t>& indices = split.images->indices;
  const int64_t n = int64_t(indices.size()), batch = std::min<int64_t>(64, std::max<int64_t>(1, n));
  const size_t len = size_t(m.channels) * m.image_size * m.image_size, per_head = size_t(m.tokens()) * m.tokens();
  Activations acts(m, int(batch), false);
  std::vector<float> images(size_t(batch) * len);
  ProgressLine progress;
  for (int64_t start = 0; start < n; start += batch) {
    const int B = int(std::min(batch, n - start));
    for (int b = 0; b < B; ++b) {
      Image8 pixels = Image8::from_shape({size_t(m.channels), size_t(m.image_size), size_t(m.image_size)});
      std::copy_n(set.images.data() + size_t(indices[size_t(start + b)]) * len, len, pixels.data());
      const std::vector<float> one = normalise_image(pixels, config.data.mean, config.data.std);
      std::copy(one.begin(), one.end(), images.begin() + ptrdiff_t(size_t(b) * len));
    }
    vit_forward(model, acts, images.data(), B, false, 0);
    for (int b = 0; b < B; ++b) {
      for (int l = 0; l < m.depth; ++l)
        stats.add_layer(l, acts.blocks[size_t(l)].att + size_t(b) * m.heads * per_head);
      stats.count_image();
    }
    if (progress.is_terminal() || (start / batch) % 20 == 19 || start + B == n)
      progress.update(strprintf("attention statistics: %lld/%lld images", (long long)(start + B), (long long)n));
  }
  progress.finish();
}

}  // namespace

int run_attention(const AttentionOptions& opt) {
  const bool by_file = !opt.images.empty(), by_index = opt.index >= 0, by_count = opt.count >= 0;
  if (int(by_file) + int(by_index) + int(by_count) > 1)
    throw Error("give one of --image FILE..., --index N or --count N");
  if (!by_file && !by_index && !by_count && !opt.stats)
    throw Error("no input image: give --image FILE..., --index N, --count N or --stats");
  if (by_file && !opt.split.empty())
    throw Error("--split " + opt.split + ": --split chooses the split for --index and --count, not for --image");
  if (by_count && opt.count == 0) throw Error("--count 0: expected at least 1 image");
  const Split split = parse_split(opt.split.empty() ? "test" : opt.split, "--split");
  const Fusion fusion = parse_fusion(opt.fusion, "--fusion");
  if (!(opt.discard >= 0.0 && opt.discard <= 1.0))
    throw Error("--discard " + strprintf("%g", opt.discard) + ": expected a fraction from 0 to 1");
  if (opt.out_dir.empty()) throw Error("--out: give the directory to write the maps to");

  Checkpoint ckpt = load_checkpoint(opt.checkpoint);
  const Config& config = ckpt.config;
  const ModelConfig& m = config.model;
  check_class_index(opt.class_index, m.num_classes);  // before anything is read or written
  set_num_threads(opt.threads >= 0 ? opt.threads : config.train.threads);

  // Every input is read before anything is written, so a bad one leaves nothing behind.
  std::vector<SourceImage> inputs;
  std::unique_ptr<SplitSource> source;
  if (by_index || by_count || (opt.stats && !by_file)) source = open_split(ckpt, split);
  if (by_file)
    for (const std::string& path : opt.images) inputs.push_back(image_from_file(path, config));
  if (by_index) inputs.push_back(image_from_split(ckpt, *source, opt.index));
  if (by_count) {
    const int64_t available = int64_t(source->images->indices.size());
    if (available == 0) throw Error("--count: the " + source->name + " split of " + config.data.path + " is empty");
    int64_t count = opt.count;
    if (count > available) {
      std::fprintf(stderr, "--count %lld: the %s split has %lld images; taking all of them\n", (long long)count,
                   source->name.c_str(), (long long)available);
      count = available;
    }
    for (int64_t n = 0; n < count; ++n) inputs.push_back(image_from_split(ckpt, *source, n));
  }
  const bool gallery = by_count || inputs.size() > 1 || (opt.stats && inputs.empty());
  for (size_t i = 0; i < inputs.size() && by_file; ++i) {
    std::string stem = std::filesystem::path(opt.images[i]).stem().string();
    for (char& c : stem)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
    inputs[i].folder = strprintf("%03zu_%s", i, stem.c_str());
  }
  ensure_writable_dir(opt.out_dir);

  std::optional<AttentionStats> stats;
  if (opt.stats) stats.emplace(m);
  std::vector<GalleryItem> items;
  ProgressLine progress;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string dir = gallery ? opt.out_dir + "/" + inputs[i].folder : opt.out_dir;
    items.push_back(write_image_folder(*ckpt.model, ckpt, inputs[i], dir, opt, fusion, stats ? &*stats : nullptr));
    // On a terminal every image; in a log about ten lines in all.
    const size_t every = progress.is_terminal() ? 1 : std::max<size_t>(1, inputs.size() / 10);
    if (gallery && ((i + 1) % every == 0 || i + 1 == inputs.size()))
      progress.update(strprintf("attention: %zu/%zu images", i + 1, inputs.size()));
  }
  progress.finish();
  std::string stats_source;
  if (stats && inputs.empty()) {
    stats_over_split(*ckpt.model, config, *source, *stats);
    stats_source = "the " + source->name + " split of " + config.data.path;
  } else if (stats) {
    stats_source = by_file ? "the given image files" : "the first " + std::to_string(inputs.size()) + " images of the " + source->name + " split of " + config.data.path;
  }
  std::optional<nlohmann::ordered_json> stats_json;
  if (stats) {
    stats_json = attention_stats_json(*stats, stats_source + "; checkpoint " + opt.checkpoint);
    write_file_atomic(opt.out_dir + "/stats.json", stats_json->dump(2) + "\n");
    write_png(opt.out_dir + "/stats.png", render_attention_stats(*stats));
  }
  if (gallery) {
    write_file_atomic(opt.out_dir + "/index.html",
                      render_gallery_html(items, "Attention of " + opt.checkpoint, stats_json ? &*stats_json : nullptr));
  } else if (stats) {
    write_file_atomic(opt.out_dir + "/stats.html",
                      render_gallery_html({}, "Attention of " + opt.checkpoint, &*stats_json));
  }

  if (!gallery) {
    const GalleryItem& it = items.front();
    std::printf("%s: predicted %s (%.1f%%)%s\n", by_file ? opt.images[0].c_str() : it.name.c_str(),
                it.predicted.c_str(), 100.0 * it.probability, it.label.empty() ? "" : (", label " + it.label).c_str());
    std::printf("attention.npy [%d, %d, %d, %d], rollout.npy and grad_rollout.npy [%d, %d], pictures and "
                "summary.json in %s\nopen %s/index.html to explore them\n",
                m.depth, m.heads, m.tokens(), m.tokens(), m.grid(), m.grid(), opt.out_dir.c_str(), opt.out_dir.c_str());
  } else {
    const auto wrong = std::count_if(items.begin(), items.end(), [](const GalleryItem& it) { return it.misclassified; });
    if (!items.empty()) std::printf("%zu images, %lld misclassified; one folder each in %s\n", items.size(), (long long)wrong, opt.out_dir.c_str());
    if (stats) std::printf("attention statistics over %lld images: stats.json, stats.png\n", (long long)stats->images);
    std::printf("open %s/index.html to see them\n", opt.out_dir.c_str());
  }
  return 0;
}

}  // namespace minivit
