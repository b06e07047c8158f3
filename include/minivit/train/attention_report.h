#pragma once
// What `minivit attention` writes for one image, and its statistics over a split: the
// report of inspect/'s maps, rollouts and pictures as files (.npy, .png, summary.json and the
// explorer page, docs/commands.md).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "minivit/core/config.h"
#include "minivit/data/image_io.h"
#include "minivit/inspect/attention_maps.h"
#include "minivit/inspect/attention_stats.h"
#include "minivit/inspect/explorer.h"
#include "minivit/model/vit.h"
#include "minivit/train/splits.h"

namespace minivit {

// One image to report on, and where it came from.
struct ReportImage {
  Image8 pixels;                  // (C, S, S) at the model's channels and size
  nlohmann::ordered_json source;  // where it came from, for summary.json
  std::string name;               // for the gallery: "test 17" or the file's name
  std::string folder;             // its folder under --out when there are several
  std::string label;              // true class name when known
  int label_index = -1;
};

// What every report of one run shares: the checkpoint's config, class names, path and step,
// and the choices of the command line (--class, --fusion, --discard).
struct ReportSettings {
  const Config& config;
  const std::vector<std::string>& class_names;
  std::string checkpoint;
  int64_t step = 0;
  int class_index = -1;  // -1: the predicted class
  Fusion fusion = Fusion::mean;
  double discard = 0.0;
};

// Everything of one image into `dir` (created if needed): one evaluation forward and one
// backward of the explained class, the .npy files, the pictures, summary.json and the
// explorer page; adds the image's attention to `stats` when given. Returns its gallery entry.
GalleryItem write_attention_report(ViT& model, const ReportSettings& settings, ReportImage& img,
                                   const std::string& dir, AttentionStats* stats);

// Attention statistics over every image of a split: evaluation forwards in batches of 64,
// with a progress line.
void attention_stats_over(const ViT& model, const Config& config, const SplitImages& split,
                          AttentionStats& stats);

}  // namespace minivit
