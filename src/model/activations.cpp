#include "minivit/model/activations.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>

#include "minivit/core/error.h"
#include "minivit/kernels/threads.h"
#include "minivit/model/vit.h"
#include "minivit/nn/attention.h"
#include "minivit/nn/layernorm.h"

namespace minivit {
namespace {

// The dimension letters of tensor.h, and the few sizes the layers' scratch is counted in.
enum class Dim : uint8_t {
  one,
  two,
  B,
  T,
  N,
  D,
  D3,
  M,
  H,
  K,
  PL,
  LayerNormScratch,  // layernorm_partials_floats(D)
  Slots,             // threads the attention core may use at once
  SlotFloats,        // attention_scratch_floats(T, Dh): one thread's attention scratch
  StemRows,          // a stem stage's output positions per image
  StemCols,          // a stem stage's inputs per position: 9 times its input channels
  StemOut,           // a stem stage's output channels
  Kept,              // the patches an image keeps in training (ModelConfig::kept_patches)
  LastStemCols,      // the last stem stage's inputs per position
};

// When a buffer exists.
enum class Needs : uint8_t {
  always,
  weight_transpose,  // always, and each block its own even where the blocks share the rest
  in_training,
  with_dropout,
  with_attention_dropout,
  with_drop_path,
  with_patch_drop,    // training with model.patch_drop > 0
  with_branch_drops,  // dropout or drop path: a branch's gradient goes through a mask
  with_learned_scores,  // training an attention form with parameters of its own
  with_attention_grads,  // explaining a prediction: backward keeps the gradient at att
  with_conv_stem_in_training,  // training with model.patch_embed = "conv"
  stem_hidden,              // a stem stage before the last (the last writes patches)
  stem_hidden_in_training,  // the same, training
  stem_hidden_with_patch_drop,  // the same, training with patch dropout
  stem_input_grad,          // training, a stem stage after the first
  with_stem_patch_drop,     // training with patch dropout behind a conv stem
  with_stem_patch_drop_input_grad,  // the same, with a stem of two stages or more
  with_seq_pool,              // model.pool = seq
  with_seq_pool_in_training,  // the same, training
};

template <class Owner>
struct BufferSpec {
  const char* name;
  std::variant<float * Owner::*, uint8_t * Owner::*> field;
  std::array<Dim, 4> shape;  // unused trailing dimensions are Dim::one
  Needs needs;
};

using Blk = BlockActivations;
using Act = Activations;
using enum Dim;
using enum Needs;

// Per block (L of each).
const BufferSpec<Blk> kBlockBuffers[] = {
    {"x", &Blk::x, {B, T, D, one}, always},
    {"ln1", &Blk::ln1, {B, T, D, one}, always},
    {"ln1_mean", &Blk::ln1_mean, {B, T, one, one}, always},
    {"ln1_rstd", &Blk::ln1_rstd, {B, T, one, one}, always},
    {"qkv", &Blk::qkv, {B, T, D3, one}, always},
    {"att", &Blk::att, {B, H, T, T}, always},
    {"att_mask", &Blk::att_mask, {B, H, T, T}, with_attention_dropout},
    {"att_out", &Blk::att_out, {B, T, D, one}, always},
    {"proj_mask", &Blk::proj_mask, {B, T, D, one}, with_dropout},
    {"resid_mid", &Blk::resid_mid, {B, T, D, one}, always},
    {"ln2", &Blk::ln2, {B, T, D, one}, always},
    {"ln2_mean", &Blk::ln2_mean, {B, T, one, one}, always},
    {"ln2_rstd", &Blk::ln2_rstd, {B, T, one, one}, always},
    {"fc1", &Blk::fc1, {B, T, M, one}, always},
    {"fc2_in", &Blk::fc2_in, {B, T, M, one}, always},
    {"gelu_mask", &Blk::gelu_mask, {B, T, M, one}, with_dropout},
    {"fc2_mask", &Blk::fc2_mask, {B, T, D, one}, with_dropout},
    {"path_scale_att", &Blk::path_scale_att, {B, one, one, one}, with_drop_path},
    {"path_scale_mlp", &Blk::path_scale_mlp, {B, one, one, one}, with_drop_path},
    {"att_grad", &Blk::att_grad, {B, H, T, T}, with_attention_grads},
    {"qkv_w_t", &Blk::qkv_w_t, {D, D3, one, one}, weight_transpose},
    {"proj_w_t", &Blk::proj_w_t, {D, D, one, one}, weight_transpose},
    {"fc1_w_t", &Blk::fc1_w_t, {D, M, one, one}, weight_transpose},
    {"fc2_w_t", &Blk::fc2_w_t, {M, D, one, one}, weight_transpose},
};

// Once per model.
const BufferSpec<Act> kModelBuffers[] = {
    {"patches", &Act::patches, {B, N, PL, one}, always},
    {"patch_proj", &Act::patch_proj, {B, N, D, one}, always},
    {"patch_w_t", &Act::patch_w_t, {PL, D, one, one}, always},
    {"patch_keep", &Act::patch_keep, {B, N, one, one}, with_patch_drop},
    {"patch_draws", &Act::patch_draws, {B, N, one, one}, with_patch_drop},
    {"kept_cols", &Act::kept_cols, {B, Kept, LastStemCols, one}, with_stem_patch_drop},
    {"kept_pre", &Act::kept_pre, {B, Kept, PL, one}, with_stem_patch_drop},
    {"kept_patches", &Act::kept_patches, {B, Kept, PL, one}, with_patch_drop},
    {"kept_patch_proj", &Act::kept_patch_proj, {B, Kept, D, one}, with_patch_drop},
    {"dkept_patch_proj", &Act::dkept_patch_proj, {B, Kept, D, one}, with_stem_patch_drop},
    {"dkept_patches", &Act::dkept_patches, {B, Kept, PL, one}, with_stem_patch_drop},
    {"dkept_pre", &Act::dkept_pre, {B, Kept, PL, one}, with_stem_patch_drop},
    {"dkept_cols", &Act::dkept_cols, {B, Kept, LastStemCols, one},
     with_stem_patch_drop_input_grad},
    {"x_final", &Act::x_final, {B, T, D, one}, always},
    {"branch", &Act::branch, {B, T, D, one}, always},
    {"pooled", &Act::pooled, {B, D, one, one}, always},
    {"pooled_norm", &Act::pooled_norm, {B, D, one, one}, always},
    {"pooled_mean", &Act::pooled_mean, {B, one, one, one}, always},
    {"pooled_rstd", &Act::pooled_rstd, {B, one, one, one}, always},
    {"token_norm", &Act::token_norm, {B, T, D, one}, with_seq_pool},
    {"token_mean", &Act::token_mean, {B, T, one, one}, with_seq_pool},
    {"token_rstd", &Act::token_rstd, {B, T, one, one}, with_seq_pool},
    {"pool_weights", &Act::pool_weights, {B, T, one, one}, with_seq_pool},
    {"logits", &Act::logits, {B, K, one, one}, always},
    {"probs", &Act::probs, {B, K, one, one}, always},
    {"dlogits", &Act::dlogits, {B, K, one, one}, in_training},
    {"dpooled_norm", &Act::dpooled_norm, {B, D, one, one}, in_training},
    {"dpooled", &Act::dpooled, {B, D, one, one}, in_training},
    {"dtoken_norm", &Act::dtoken_norm, {B, T, D, one}, with_seq_pool_in_training},
    {"pool_score_grads", &Act::pool_score_grads, {B, T, one, one}, with_seq_pool_in_training},
    {"dresid", &Act::dresid_0, {B, T, D, one}, in_training},
    {"dresid", &Act::dresid_1, {B, T, D, one}, in_training},
    {"dresid", &Act::dresid_2, {B, T, D, one}, in_training},
    {"datt_out", &Act::datt_out, {B, T, D, one}, in_training},
    {"dgelu", &Act::dgelu, {B, T, M, one}, with_dropout},
    {"dpatch_proj", &Act::dpatch_proj, {B, N, D, one}, in_training},
    {"dpatches", &Act::dpatches, {B, N, PL, one}, with_conv_stem_in_training},
    {"layernorm_partials",
     &Act::layernorm_partials,
     {LayerNormScratch, two, one, one},
     in_training},
    {"attention_scratch", &Act::attention_scratch, {Slots, SlotFloats, one, one}, always},
};

// Per set of a block's gradient scratch (two of them).
using Grd = BlockGradScratch;
const BufferSpec<Grd> kGradScratchBuffers[] = {
    {"dresid_mid", &Grd::dresid_mid, {B, T, D, one}, in_training},
    {"dbranch", &Grd::dbranch, {B, T, D, one}, with_branch_drops},
    {"dbranch_att", &Grd::dbranch_att, {B, T, D, one}, with_branch_drops},
    {"dln", &Grd::dln, {B, T, D, one}, in_training},
    {"dln1", &Grd::dln1, {B, T, D, one}, in_training},
    {"dqkv", &Grd::dqkv, {B, T, D3, one}, in_training},
    {"dfc1", &Grd::dfc1, {B, T, M, one}, in_training},
    {"score_grad_pairs", &Grd::score_grad_pairs, {B, D, one, one}, with_learned_scores},
};

// Per stage of the conv stem.
using Stm = StemActivations;
const BufferSpec<Stm> kStemBuffers[] = {
    {"stem_cols", &Stm::cols, {B, StemRows, StemCols, one}, always},
    {"stem_pre", &Stm::pre, {B, StemRows, StemOut, one}, always},
    {"stem_out", &Stm::out, {B, StemRows, StemOut, one}, stem_hidden},
    {"stem_dout", &Stm::dout, {B, StemRows, StemOut, one}, stem_hidden_in_training},
    {"stem_dpre", &Stm::dpre, {B, StemRows, StemOut, one}, in_training},
    {"stem_dcols", &Stm::dcols, {B, StemRows, StemCols, one}, stem_input_grad},
    {"stem_weight_t", &Stm::weight_t, {StemCols, StemOut, one, one}, always},
    {"stem_read", &Stm::read, {B, StemRows, one, one}, stem_hidden_with_patch_drop},
};

// Threads the attention core may use: the pool's size, or the core count if larger, so
// that a pool grown later still finds scratch for every thread it runs.
int attention_threads() { return std::max(num_threads(), max_work_blocks()); }

// The extent of d for a buffer of stem stage `stage` (-1 outside the stem).
double extent(Dim d, const ModelConfig& c, int batch, int stage) {
  switch (d) {
    case one:
      return 1;
    case two:
      return 2;
    case B:
      return batch;
    case T:
      return c.tokens();
    case N:
      return c.patches();
    case D:
      return c.dim;
    case D3:
      return 3.0 * c.dim;
    case M:
      return c.mlp_dim;
    case H:
      return c.heads;
    case K:
      return c.num_classes;
    case PL:
      return c.patch_len();
    case LayerNormScratch:
      return double(layernorm_partials_floats(c.dim));
    case Slots:
      return attention_threads();
    case SlotFloats:
      return double(attention_scratch_floats(c.tokens(), c.head_dim()));
    case StemRows:
      return double(c.stem_side(stage)) * c.stem_side(stage);
    case StemCols:
      return 9.0 * c.stem_in(stage);
    case StemOut:
      return c.stem_out(stage);
    case Kept:
      return c.kept_patches();
    case LastStemCols:
      return c.stem_stages() > 0 ? 9.0 * c.stem_in(c.stem_stages() - 1) : 0.0;
  }
  return 0;
}

bool needed(Needs needs, const ModelConfig& c, ActivationsFor use, int stage) {
  const bool training = runs_backward(use);
  const bool hidden_stage = stage >= 0 && stage + 1 < c.stem_stages();
  switch (needs) {
    case always:
    case weight_transpose:
      return true;
    case in_training:
      return training;
    case with_dropout:
      return training && c.dropout > 0.0f;
    case with_attention_dropout:
      return training && c.attention_dropout > 0.0f;
    case with_drop_path:
      return training && c.drop_path > 0.0f;
    case with_patch_drop:
      return c.drops_patches(training);
    case with_branch_drops:
      return training && (c.dropout > 0.0f || c.drop_path > 0.0f);
    case with_learned_scores:
      return training && attention_has_score_params(c.attention);
    case with_attention_grads:
      return use == ActivationsFor::explanation;
    case with_conv_stem_in_training:
      return training && c.stem_stages() > 0;
    case stem_hidden:
      return hidden_stage;
    case stem_hidden_in_training:
      return training && hidden_stage;
    case stem_hidden_with_patch_drop:
      return c.drops_patches(training) && hidden_stage;
    case stem_input_grad:
      return training && stage > 0;
    case with_stem_patch_drop:
      return c.drops_patches(training) && c.stem_stages() > 0;
    case with_stem_patch_drop_input_grad:
      return c.drops_patches(training) && c.stem_stages() > 1;
    case with_seq_pool:
      return c.pool == PoolKind::seq;
    case with_seq_pool_in_training:
      return training && c.pool == PoolKind::seq;
  }
  return false;
}

template <class Owner>
double elements(const BufferSpec<Owner>& spec, const ModelConfig& c, int batch, int stage) {
  double n = 1;
  for (Dim d : spec.shape) n *= extent(d, c, batch, stage);
  return n;
}

template <class Owner>
bool is_mask(const BufferSpec<Owner>& spec) {
  return spec.field.index() == 1;
}

// Each buffer starts on a cache line: its element count is rounded up to whole lines.
constexpr int64_t kLineBytes = 64;
template <class Owner>
double aligned_bytes(const BufferSpec<Owner>& spec, const ModelConfig& c, int batch, int stage) {
  const double bytes = elements(spec, c, batch, stage) * (is_mask(spec) ? 1 : sizeof(float));
  return std::ceil(bytes / kLineBytes) * kLineBytes;
}

template <class T>
T* align_to_line(T* p) {
  return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(p) + kLineBytes - 1) &
                              ~uintptr_t(kLineBytes - 1));
}

// A block's buffer that every block keeps for itself even where the blocks share the rest:
// its weights' transposes, which differ from block to block.
bool own_to_each_block(const BufferSpec<Blk>& spec) { return spec.needs == weight_transpose; }

// Calls visit(spec, owner, stage, shared) for every buffer in the tables, the stem's stages
// first, then the blocks, the two sets of gradient scratch, then the model's own, with
// `owner` the struct its field lives in (nullptr when `acts` is), `stage` the stem stage (-1
// outside the stem), and `shared` true for a block's buffer that is block 0's (the blocks
// after the first where they share their buffers, ActivationsFor::evaluation).
template <class Visit>
void for_each_buffer(const ModelConfig& c, ActivationsFor use, Activations* acts, Visit&& visit) {
  for (int s = 0; s < c.stem_stages(); ++s)
    for (const auto& spec : kStemBuffers)
      visit(spec, acts ? &acts->stem[size_t(s)] : nullptr, s, false);
  for (int l = 0; l < c.depth; ++l)
    for (const auto& spec : kBlockBuffers)
      visit(spec, acts ? &acts->blocks[size_t(l)] : nullptr, -1,
            use == ActivationsFor::evaluation && l > 0 && !own_to_each_block(spec));
  for (size_t set = 0; set < 2; ++set)
    for (const auto& spec : kGradScratchBuffers)
      visit(spec, acts ? &acts->block_grads[set] : nullptr, -1, false);
  for (const auto& spec : kModelBuffers) visit(spec, acts, -1, false);
}

// Both flat buffers carry one line of slack, to start their first buffer on a line.
constexpr double kSlackBytes = 2 * kLineBytes;

}  // namespace

std::vector<ActivationBuffer> activation_buffers(const ModelConfig& c, int batch,
                                                 ActivationsFor use) {
  std::vector<ActivationBuffer> list;
  for_each_buffer(c, use, nullptr, [&](const auto& spec, auto*, int stage, bool shared) {
    if (shared || !needed(spec.needs, c, use, stage)) return;
    const double bytes = aligned_bytes(spec, c, batch, stage);
    for (ActivationBuffer& seen : list)
      if (seen.name == spec.name) return void(seen.bytes += bytes);
    list.push_back({spec.name, bytes});
  });
  return list;
}

double activation_bytes(const ModelConfig& c, int batch, ActivationsFor use) {
  double total = kSlackBytes;
  for (const ActivationBuffer& buffer : activation_buffers(c, batch, use)) total += buffer.bytes;
  return total;
}

Activations::Activations(const ModelConfig& c, int B, ActivationsFor use)
    : config(c), max_batch(B), use(use) {
  if (B < 1)
    throw Error("activations: the batch size must be at least 1, got " + std::to_string(B));
  check_vit_fits_memory(c, B, use);
  blocks.resize(size_t(c.depth));
  stem.resize(size_t(c.stem_stages()));
  attention_slots = attention_threads();
  double float_bytes = kLineBytes, mask_bytes = kLineBytes;
  for_each_buffer(c, use, nullptr, [&](const auto& spec, auto*, int stage, bool shared) {
    if (!shared && needed(spec.needs, c, use, stage))
      (is_mask(spec) ? mask_bytes : float_bytes) += aligned_bytes(spec, c, B, stage);
  });
  floats_ = Tensor1::from_shape({size_t(float_bytes) / sizeof(float)});
  masks_ = Mask1::from_shape({size_t(mask_bytes)});
  char* next_float = reinterpret_cast<char*>(align_to_line(floats_.data()));
  char* next_mask = reinterpret_cast<char*>(align_to_line(masks_.data()));
  for_each_buffer(c, use, this, [&](const auto& spec, auto* owner, int stage, bool shared) {
    const bool exists = needed(spec.needs, c, use, stage);
    char*& next = is_mask(spec) ? next_mask : next_float;
    std::visit(
        [&](auto field) {
          using Pointer = std::remove_reference_t<decltype(owner->*field)>;
          if constexpr (std::is_same_v<std::remove_pointer_t<decltype(owner)>, BlockActivations>)
            if (shared) return void(owner->*field = blocks[0].*field);
          owner->*field = exists ? reinterpret_cast<Pointer>(next) : nullptr;
        },
        spec.field);
    if (exists && !shared) next += int64_t(aligned_bytes(spec, c, B, stage));
  });
}

int64_t Activations::bytes() const {
  return int64_t(floats_.size() * sizeof(float) + masks_.size());
}

}  // namespace minivit
