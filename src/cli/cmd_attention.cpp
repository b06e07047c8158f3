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
#include "minivit/inspect/attention_maps.h"
#include "minivit/inspect/attention_stats.h"
#include "minivit/inspect/explorer.h"
#include "minivit/inspect/grad_rollout.h"
#include "minivit/kernels/threads.h"
#include "minivit/train/attention_report.h"
#include "minivit/train/splits.h"

namespace minivit {
namespace {

ReportImage image_from_file(const std::string& path, const Config& config) {
  LoadedImage img = load_image_file(path, config.model.channels, config.model.image_size);
  ReportImage out;
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

ReportImage image_from_split(const Checkpoint& ckpt, const SplitSource& split, int64_t n) {
  const Dataset& set = split.images->dataset;
  const std::vector<int64_t>& indices = split.images->indices;
  if (n >= int64_t(indices.size()))
    throw Error("--index " + std::to_string(n) + ": the " + split.name + " split of " + ckpt.config.data.path +
                " has " + std::to_string(indices.size()) + " images" +
                (indices.empty() ? "" : " (index 0 to " + std::to_string(indices.size() - 1) + ")"));
  const int64_t i = indices[size_t(n)];
  ReportImage out;
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

// The split and fusion the options choose; their mistakes before the checkpoint is read.
struct Choices {
  Split split;
  Fusion fusion;
};
Choices check_options(const AttentionOptions& opt) {
  const bool by_file = !opt.images.empty(), by_index = opt.index >= 0, by_count = opt.count >= 0;
  if (int(by_file) + int(by_index) + int(by_count) > 1)
    throw Error("give one of --image FILE..., --index N or --count N");
  if (!by_file && !by_index && !by_count && !opt.stats)
    throw Error("no input image: give --image FILE..., --index N, --count N or --stats");
  if (by_file && !opt.split.empty())
    throw Error("--split " + opt.split + ": --split chooses the split for --index and --count, not for --image");
  if (by_count && opt.count == 0) throw Error("--count 0: expected at least 1 image");
  const Choices choices{parse_split(opt.split.empty() ? "test" : opt.split, "--split"),
                        parse_fusion(opt.fusion, "--fusion")};
  if (!(opt.discard >= 0.0 && opt.discard <= 1.0))
    throw Error("--discard " + strprintf("%g", opt.discard) + ": expected a fraction from 0 to 1");
  if (opt.out_dir.empty()) throw Error("--out: give the directory to write the maps to");
  return choices;
}

// The images the options name, each with the folder it is written to in a gallery; the
// split they come from opened in `source` when one is needed.
std::vector<ReportImage> read_inputs(const AttentionOptions& opt, const Checkpoint& ckpt,
                                     Split split, std::unique_ptr<SplitSource>& source) {
  const Config& config = ckpt.config;
  const bool by_file = !opt.images.empty(), by_index = opt.index >= 0, by_count = opt.count >= 0;
  std::vector<ReportImage> inputs;
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
  for (size_t i = 0; i < inputs.size() && by_file; ++i) {
    std::string stem = std::filesystem::path(opt.images[i]).stem().string();
    for (char& c : stem)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
    inputs[i].folder = strprintf("%03zu_%s", i, stem.c_str());
  }
  return inputs;
}

// stats.json, stats.png and, with no gallery, stats.html; the JSON for the gallery's page.
nlohmann::ordered_json write_stats(const AttentionOptions& opt, const Checkpoint& ckpt,
                                   AttentionStats& stats, size_t images, const SplitSource* source) {
  const Config& config = ckpt.config;
  std::string stats_source;
  if (images == 0) {
    attention_stats_over(*ckpt.model, config, *source->images, stats);
    stats_source = "the " + source->name + " split of " + config.data.path;
  } else {
    stats_source = !opt.images.empty() ? "the given image files" : "the first " + std::to_string(images) + " images of the " + source->name + " split of " + config.data.path;
  }
  nlohmann::ordered_json stats_json =
      attention_stats_json(stats, stats_source + "; checkpoint " + opt.checkpoint);
  write_file_atomic(opt.out_dir + "/stats.json", stats_json.dump(2) + "\n");
  write_png(opt.out_dir + "/stats.png", render_attention_stats(stats));
  return stats_json;
}

// What was written, on standard output.
void print_summary(const AttentionOptions& opt, const ModelConfig& m, bool gallery,
                   const std::vector<GalleryItem>& items, const AttentionStats* stats) {
  if (!gallery) {
    const GalleryItem& it = items.front();
    std::printf("%s: predicted %s (%.1f%%)%s\n", !opt.images.empty() ? opt.images[0].c_str() : it.name.c_str(),
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
}

}  // namespace

int run_attention(const AttentionOptions& opt) {
  const Choices choices = check_options(opt);
  Checkpoint ckpt = load_checkpoint(opt.checkpoint);
  const Config& config = ckpt.config;
  const ModelConfig& m = config.model;
  check_class_index(opt.class_index, m.num_classes);  // before anything is read or written
  set_num_threads(opt.threads >= 0 ? opt.threads : config.train.threads);

  // Every input is read before anything is written, so a bad one leaves nothing behind.
  std::unique_ptr<SplitSource> source;
  std::vector<ReportImage> inputs = read_inputs(opt, ckpt, choices.split, source);
  const bool gallery = opt.count >= 0 || inputs.size() > 1 || (opt.stats && inputs.empty());
  ensure_writable_dir(opt.out_dir);

  const ReportSettings report{config, ckpt.class_names, opt.checkpoint, ckpt.progress.step,
                              opt.class_index, choices.fusion, opt.discard};
  std::optional<AttentionStats> stats;
  if (opt.stats) stats.emplace(m);
  std::vector<GalleryItem> items;
  ProgressLine progress;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string dir = gallery ? opt.out_dir + "/" + inputs[i].folder : opt.out_dir;
    items.push_back(write_attention_report(*ckpt.model, report, inputs[i], dir, stats ? &*stats : nullptr));
    // On a terminal every image; in a log about ten lines in all.
    const size_t every = progress.is_terminal() ? 1 : std::max<size_t>(1, inputs.size() / 10);
    if (gallery && ((i + 1) % every == 0 || i + 1 == inputs.size()))
      progress.update(strprintf("attention: %zu/%zu images", i + 1, inputs.size()));
  }
  progress.finish();
  std::optional<nlohmann::ordered_json> stats_json;
  if (stats) stats_json = write_stats(opt, ckpt, *stats, inputs.size(), source.get());
  if (gallery) {
    write_file_atomic(opt.out_dir + "/index.html",
                      render_gallery_html(items, "Attention of " + opt.checkpoint, stats_json ? &*stats_json : nullptr));
  } else if (stats) {
    write_file_atomic(opt.out_dir + "/stats.html",
                      render_gallery_html({}, "Attention of " + opt.checkpoint, &*stats_json));
  }
  print_summary(opt, m, gallery, items, stats ? &*stats : nullptr);
  return 0;
}

}  // namespace minivit
