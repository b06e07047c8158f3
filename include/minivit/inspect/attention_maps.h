#pragma once
// What a trained ViT looks at, for one image: the softmax attention weights of every layer
// and head, attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in
// Transformers"), per-head statistics and the pictures `minivit attention` writes.
//
// The maps are the very weights the model computes: vit_forward in eval mode (no dropout)
// keeps each block's softmax (B, H, T, T) in Activations::blocks[l].att, and
// collect_attention copies them out, so there is no second implementation of attention
// here that could drift from the one that is trained.
//
//   AttentionMaps m = collect_attention(model, image);                // image: normalised (C, S, S)
//   Tensor2 r = attention_rollout(m.att, m.pool, Fusion::mean, 0.0);  // (G, G)
//
// Legend as in tensor.h: L layers, H heads, G the patch grid side, N = G * G, T tokens: with
// model.pool = cls T = 1 + N (the CLS token first, then the patches row-major); with
// model.pool = mean or seq T = N (the patches alone).
//
// "Where the model looks" is read where the head reads: the CLS token's row of attention
// over the patches; when the head reads the mean of the tokens (PoolKind::mean), the mean of
// all token rows; with sequence pooling (PoolKind::seq), the token rows weighted by the
// pooling's weights for that image, as the head weighs the tokens' final states.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "minivit/core/tensor.h"
#include "minivit/data/image_io.h"
#include "minivit/inspect/canvas.h"
#include "minivit/model/activations.h"
#include "minivit/model/vit.h"

namespace minivit {

// What the head reads of the last block's tokens, to read the maps where it reads. A
// PoolKind converts to it for cls and mean; seq also needs the image's pooling weights.
struct Readout {
  PoolKind pool = PoolKind::cls;
  std::vector<float> token_weights;  // (T) PoolKind::seq only: softmax_t(w . z_t), sums to 1
  Readout(PoolKind kind) : pool(kind) {}  // NOLINT(google-explicit-constructor)
  Readout(PoolKind kind, std::vector<float> weights)
      : pool(kind), token_weights(std::move(weights)) {}
};

struct AttentionMaps {
  Tensor4 att;                 // (L, H, T, T) softmax weights; row i = where token i looks
  PoolKind pool = PoolKind::cls;  // the model's: whether token 0 is a CLS token
  std::vector<float> pool_weights;  // (T) model.pool = seq: each token's share of what the
                                    // head reads (nn/seq_pool.h); empty otherwise
  std::vector<float> logits;   // (K)
  std::vector<double> probs;   // (K)
  Readout readout() const { return {pool, pool_weights}; }
};

// One forward pass of `model` in eval mode on one normalised image (C, S, S).
AttentionMaps collect_attention(const ViT& model, const float* image);

// The maps of the one image in `acts` after vit_forward of a model of config `c`.
AttentionMaps attention_maps_of(const ModelConfig& c, const Activations& acts);

// ---------------------------------------------------------------------------------------
// Attention rollout

enum class Fusion { mean, max, min };
// "mean" | "max" | "min"; anything else throws minivit::Error naming `what`.
Fusion parse_fusion(const std::string& text, const std::string& what);
const char* fusion_name(Fusion fusion);

// (H, T, T) -> (T, T): the heads of one layer combined elementwise.
Tensor2 fuse_heads(const Tensor3& heads, Fusion fusion);

// Zeroes the floor(ratio * candidates) smallest candidate entries of `a` (T, T), ties broken
// by position (row-major). With a CLS token the candidates are columns 1..T-1, T * (T - 1)
// of them: column 0 (attention to CLS) is never touched, as it carries the information the
// CLS token gathers, and dropping it would cut every path back to the output. Without one
// (PoolKind::mean) every entry is a candidate. ratio in [0, 1].
void discard_lowest(Tensor2& a, PoolKind pool, double ratio);

// A_L ... A_2 A_1 (T, T) for the L given (T, T) layers, where A_l = rownorm(layer_l + I):
// the identity stands for the residual connection. Computed in double.
Tensor2 rollout_chain(const std::vector<Tensor2>& layers);

// The rollout matrix A_L ... A_2 A_1 (T, T), where A_l = rownorm(discard(fuse(att[l])) + I):
// the identity stands for the residual connection, and every row is renormalised to sum 1
// so that each A_l is again a distribution over the tokens below. Computed in double.
Tensor2 rollout_matrix(const Tensor4& att, PoolKind pool, Fusion fusion, double discard_ratio);

// The rollout read where the head reads, over the patches as the (G, G) grid. With a CLS
// token: row 0 of rollout_matrix over columns 1..N, how much of the CLS token's final state
// flows from each patch, not renormalised (the rest of the row, column 0, is the flow from
// the CLS token itself). Without one: the mean of all rows (mean pooling), or the rows
// weighted by the pooling weights (seq), how much of what the head reads flows from each
// patch; it sums to 1.
Tensor2 attention_rollout(const Tensor4& att, const Readout& readout, Fusion fusion,
                          double discard_ratio);

// That reading of any rollout matrix (T, T): its CLS row over the patches, the mean of its
// rows, or its rows weighted by the pooling weights, as the (G, G) grid. Throws
// minivit::Error when a seq readout's weights are not one per token.
Tensor2 readout_rollout(const Tensor2& joint, const Readout& readout);

// Where the head's input looks among the N patches in layer `layer`, head `head` of `att`
// (L, H, T, T): the CLS row without its CLS column (not renormalised), the mean of all token
// rows (PoolKind::mean), or the token rows weighted by the pooling weights (PoolKind::seq);
// the last two sum to 1.
std::vector<float> readout_attention(const Tensor4& att, const Readout& readout, int layer,
                                     int head);

// What the head reads, in words for pictures and pages: "the CLS token", "the mean of all
// tokens" or "the sequence-pooled tokens".
const char* readout_name(PoolKind pool);

// ---------------------------------------------------------------------------------------
// Statistics

struct PatchWeight {
  int patch = 0;  // 0..N-1, row-major; token patch + 1
  int row = 0;    // patch / G
  int col = 0;    // patch % G
  float weight = 0.f;
};

// The k largest of `weights` (N values over the G x G grid), largest first, ties by index.
std::vector<PatchWeight> top_patches(const float* weights, int grid, int k);

// [{"patch", "row", "col", "weight"}, ...] as summary.json lists top patches.
nlohmann::ordered_json patches_json(const std::vector<PatchWeight>& top);

// Entropy in nats of the N patch weights after renormalising them to sum 1 (zero weights
// contribute nothing); ln(N) is uniform attention.
double patch_entropy(const float* weights, int n);

// summary.json: the prediction (top-5) and, per layer and head, the entropy and top patches
// of readout_attention, plus the rollout's top patches and, with sequence pooling, the
// pooling weights' top patches.
struct SummaryInputs {
  const AttentionMaps* maps = nullptr;
  const Tensor2* rollout = nullptr;  // (G, G)
  const std::vector<std::string>* class_names = nullptr;
  Fusion fusion = Fusion::mean;
  double discard = 0.0;
  nlohmann::ordered_json source;  // where the image came from (file or dataset split and index)
};
nlohmann::ordered_json attention_summary(const SummaryInputs& in);

// ---------------------------------------------------------------------------------------
// Pictures

// The image as the model saw it, nearest-neighbour upscaled by a whole factor to at least
// `min_side` pixels so each input pixel stays a crisp square.
Canvas render_input(const Image8& image, int min_side = 224);

// Where render_grid puts things, so tests (and anyone cropping the picture) can find a tile.
struct GridLayout {
  int width = 0, height = 0;  // of the whole picture
  int tile = 0;               // side of one square tile
  int left = 0, top = 0;      // top-left corner of the tile of layer 0, head 0
  int step_x = 0, step_y = 0;  // from one tile to the next head / layer
  int tile_x(int head) const { return left + head * step_x; }
  int tile_y(int layer) const { return top + layer * step_y; }
};
GridLayout grid_layout(int layers, int heads, int grid, int image_size, PoolKind pool,
                       const std::string& title);

// One tile per layer (rows) and head (columns): the input with readout_attention over the
// patches blended on top in viridis, each tile scaled to its own min..max so every head's
// pattern is visible, its largest weight printed under it and its top patch outlined.
// `title` heads the picture (for instance the predicted class).
Canvas render_grid(const Image8& image, const Tensor4& att, const Readout& readout,
                   const std::string& title);

// The input and the rollout over it, side by side, with a colour bar; `note` goes under
// the bar (for instance the fusion and discard ratio).
Canvas render_rollout(const Image8& image, const Tensor2& rollout, PoolKind pool,
                      const std::string& title, const std::string& note);

}  // namespace minivit
