#include "minivit/train/attention_report.h"

#include <algorithm>

#include "minivit/core/fileio.h"
#include "minivit/core/progress.h"
#include "minivit/data/dataset.h"
#include "minivit/formats/config_file.h"
#include "minivit/formats/npy.h"
#include "minivit/inspect/canvas.h"
#include "minivit/inspect/grad_rollout.h"

namespace minivit {

namespace {

std::string source_text(const nlohmann::ordered_json& in) {
  std::string s = in.contains("file")
                      ? "image " + in["file"].get<std::string>()
                      : in["split"].get<std::string>() + " split image " + std::to_string(in["index"].get<int64_t>()) +
                            " of " + in["dataset"].get<std::string>();
  return s + "; checkpoint " + in["checkpoint"].get<std::string>() + ", step " +
         std::to_string(in["step"].get<int64_t>());
}

// summary.json: the attention summary of the image and the class its gradient rollout explains.
nlohmann::ordered_json report_summary(const Explanation& e, const Tensor2& rollout,
                                      const ReportSettings& settings, const ReportImage& img,
                                      const std::string& explained, const ModelConfig& m) {
  SummaryInputs in;
  in.maps = &e.maps;
  in.rollout = &rollout;
  in.class_names = &settings.class_names;
  in.fusion = settings.fusion;
  in.discard = settings.discard;
  in.source = img.source;
  nlohmann::ordered_json summary = attention_summary(in);
  summary["grad_rollout"] = {
      {"class", explained},
      {"class_index", e.class_index},
      {"chosen_by", settings.class_index >= 0 ? "--class" : "prediction"},
      {"definition",
       "per layer the heads' mean of max(0, A * d logit / d A), A the attention after the softmax "
       "(evaluation mode); identity added, rows renormalised to 1, layers multiplied from the first to "
       "the last; read as the rollout is"},
      {"top_patches", patches_json(top_patches(e.grad_rollout.data(), m.grid(), 5))}};
  return summary;
}

// The arrays and pictures of one report into d (a folder's path ending in '/').
void write_report_arrays_and_pictures(const std::string& d, const Explanation& e,
                                      const Tensor2& rollout, const std::vector<float>& input,
                                      const Image8& seen, const std::string& headline,
                                      const std::string& explained,
                                      const ReportSettings& settings, const ModelConfig& m) {
  const AttentionMaps& maps = e.maps;
  const std::vector<int64_t> att_shape(maps.att.shape().begin(), maps.att.shape().end());
  const std::vector<int64_t> grid_shape = {m.grid(), m.grid()};
  write_npy(d + "attention.npy", maps.att.data(), att_shape);
  write_npy(d + "rollout.npy", rollout.data(), grid_shape);
  write_npy(d + "grad_rollout.npy", e.grad_rollout.data(), grid_shape);
  write_npy(d + "input.npy", input.data(), {m.channels, m.image_size, m.image_size});
  write_png(d + "input.png", render_input(seen));
  const std::string grid_title = maps.pool == PoolKind::cls    ? "CLS attention per layer and head: "
                                 : maps.pool == PoolKind::mean ? "Mean attention per layer and head: "
                                                               : "Pooled attention per layer and head: ";
  write_png(d + "grid.png", render_grid(seen, maps.att, maps.readout(), grid_title + headline));
  if (maps.pool == PoolKind::seq)
    write_npy(d + "pool_weights.npy", maps.pool_weights.data(), grid_shape);
  write_png(d + "rollout.png",
            render_rollout(seen, rollout, maps.pool, headline,
                           strprintf("heads fused by %s; ", fusion_name(settings.fusion)) +
                               (settings.discard > 0 ? strprintf("lowest %g%% of the weights discarded", 100 * settings.discard)
                                                : std::string("nothing discarded"))));
  write_png(d + "grad_rollout.png",
            render_rollout(seen, e.grad_rollout, maps.pool, headline,
                           "class-specific gradient rollout of " + explained));
  write_png(d + "thumb.png", render_thumbnail(seen, e.grad_rollout));
}

// index.html: the explorer page of one image, as `seen` shows it under `headline`.
std::string explorer_html(const Explanation& e, const Image8& seen,
                          const std::vector<std::string>& names, const std::string& headline,
                          const ReportSettings& settings, const ReportImage& img) {
  const ModelConfig& m = settings.config.model;
  ExplorerPage page;
  page.explanation = &e;
  page.seen = &seen;
  page.model = &m;
  page.class_names = &names;
  page.fusion = settings.fusion;
  page.discard = settings.discard;
  page.label = img.label_index;
  page.title = headline;
  page.source = source_text(img.source);
  page.attention_form = std::string(config_name(m.attention));
  return render_explorer_html(page);
}

}  // namespace

GalleryItem write_attention_report(ViT& model, const ReportSettings& settings, ReportImage& img,
                                   const std::string& dir, AttentionStats* stats) {
  const Config& config = settings.config;
  const ModelConfig& m = config.model;
  const std::vector<float> input = normalise_image(img.pixels, config.data.mean, config.data.std);
  const Explanation e = explain_class(model, input.data(), settings.class_index);
  const AttentionMaps& maps = e.maps;
  const Tensor2 rollout =
      attention_rollout(maps.att, maps.readout(), settings.fusion, settings.discard);
  if (stats) {
    for (int l = 0; l < m.depth; ++l)
      stats->add_layer(l, maps.att.data() + size_t(l) * m.heads * m.tokens() * m.tokens());
    stats->count_image();
  }
  const std::vector<std::string> names = class_names_for(settings.class_names, m.num_classes);
  const std::string explained = names[size_t(e.class_index)];
  img.source["checkpoint"] = settings.checkpoint;
  img.source["step"] = settings.step;
  const nlohmann::ordered_json summary = report_summary(e, rollout, settings, img, explained, m);

  // The pictures show the input as the model saw it: its float input, denormalised.
  const Image8 seen = denormalise_image(input.data(), m.channels, m.image_size, config.data.mean, config.data.std);
  const std::string predicted = summary["prediction"]["class"].get<std::string>();
  const double probability = summary["prediction"]["probability"].get<double>();
  std::string headline = strprintf("predicted %s (%.1f%%)", predicted.c_str(), 100.0 * probability);
  if (!img.label.empty()) headline += ", label " + img.label;

  const std::string html = explorer_html(e, seen, names, headline, settings, img);

  ensure_writable_dir(dir);
  const std::string d = dir + "/";
  write_report_arrays_and_pictures(d, e, rollout, input, seen, headline, explained, settings, m);
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

void attention_stats_over(const ViT& model, const Config& config, const SplitImages& split,
                          AttentionStats& stats) {
  const ModelConfig& m = config.model;
  const Dataset& set = split.dataset;
  const std::vector<int64_t>& indices = split.indices;
  const int64_t n = int64_t(indices.size()), batch = std::min<int64_t>(64, std::max<int64_t>(1, n));
  const size_t len = size_t(m.channels) * m.image_size * m.image_size, per_head = size_t(m.tokens()) * m.tokens();
  Activations acts(m, int(batch), ActivationsFor::inspection);  // every block's att is read
  std::vector<float> images(size_t(batch) * len);
  ProgressLine progress;
  const ForwardWeightsHeld held(model, acts);
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

}  // namespace minivit
