#pragma once
// Attention statistics over many images, per layer and head (the ViT paper's Fig. 7):
//   distance  the mean attention distance in patches: for each patch token as query, the
//             Euclidean distance on the patch grid to each patch it attends to, weighted by
//             its attention renormalised over the patches (the CLS token, which has no
//             place on the grid, is left out as query and as key); averaged over the
//             queries and the images. Small: the head looks nearby, like a convolution;
//             large: it looks across the image.
//   entropy   the mean entropy in nats of the attention rows of every token (CLS included),
//             over all T keys; ln T is uniform attention, 0 looking at one token.
//
//   AttentionStats s(config);
//   for each image: for each layer l: s.add_layer(l, att_l);  then s.count_image();
//   nlohmann::ordered_json j = attention_stats_json(s, "test split of ...");
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "minivit/core/config.h"
#include "minivit/inspect/canvas.h"

namespace minivit {

struct AttentionStats {
  int layers = 0, heads = 0, grid = 0, tokens = 0;
  PoolKind pool = PoolKind::cls;
  int64_t images = 0;
  std::vector<double> distance_sum;  // (L, H) summed over images of each image's mean
  std::vector<double> entropy_sum;   // (L, H) likewise

  explicit AttentionStats(const ModelConfig& config);

  // One image's attention of layer `layer`: (H, T, T) softmax weights.
  void add_layer(int layer, const float* att);
  // Counts one image once all its layers are added.
  void count_image() { ++images; }

  double distance(int layer, int head) const;  // mean over the images counted
  double entropy(int layer, int head) const;
};

// stats.json: the definitions, the image count, and per layer and head the two means.
nlohmann::ordered_json attention_stats_json(const AttentionStats& stats, const std::string& source);

// Two panels: distance per head against depth (a point per head, the mean over heads
// joined), and entropy likewise.
Canvas render_attention_stats(const AttentionStats& stats);

}  // namespace minivit
