#include "minivit/model/vit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include <unistd.h>

#include "minivit/core/error.h"
#include "minivit/core/rng.h"
#include "minivit/nn/attention.h"
#include "minivit/nn/dropout.h"
#include "minivit/nn/gelu.h"
#include "minivit/nn/layernorm.h"
#include "minivit/nn/linear.h"
#include "minivit/nn/mean_pool.h"
#include "minivit/nn/patch_embed.h"

namespace minivit {

// The shapes every layer relies on. The config reader checks them with file and line; a
// ModelConfig built in code meets them here.
static void check_model_shapes(const ModelConfig& c) {
  const int sizes[] = {c.image_size, c.channels, c.patch_size, c.dim,
                       c.depth,      c.heads,    c.mlp_dim,    c.num_classes};
  for (int size : sizes)
    if (size < 1)
      throw Error(
          "model: image_size, channels, patch_size, dim, depth, heads, mlp_dim and num_classes "
          "must all be at least 1");
  if (c.dim % c.heads != 0)
    throw Error("model: dim " + std::to_string(c.dim) + " is not divisible by heads " +
                std::to_string(c.heads));
  if (c.image_size % c.patch_size != 0)
    throw Error("model: image_size " + std::to_string(c.image_size) +
                " is not divisible by patch_size " + std::to_string(c.patch_size));
  if (c.pos_embed == PosEmbedKind::sincos2d && c.dim % 4 != 0)
    throw Error("model: dim " + std::to_string(c.dim) +
                " is not divisible by 4, as pos_embed sincos2d needs");
}

double vit_memory_bytes(const ModelConfig& c, int batch, bool training) {
  return 4.0 * vit_param_count(c) * (training ? 4 : 2) + activation_bytes(c, batch, training);
}

void check_vit_fits_memory(const ModelConfig& c, int batch, bool training) {
  const double needed = vit_memory_bytes(c, batch, training);
  const double available = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE));
  if (available > 0 && needed > available)
    throw Error("model: image_size " + std::to_string(c.image_size) + ", patch_size " +
                std::to_string(c.patch_size) + ", dim " + std::to_string(c.dim) + ", depth " +
                std::to_string(c.depth) + ", heads " + std::to_string(c.heads) + ", mlp_dim " +
                std::to_string(c.mlp_dim) + ", num_classes " + std::to_string(c.num_classes) +
                (batch > 0 ? " with batch " + std::to_string(batch) : std::string()) + " needs " +
                std::to_string(int64_t(needed / (1 << 30))) + " GiB, more than this machine's " +
                std::to_string(int64_t(available / (1 << 30))) + " GiB of memory");
}

ViT::ViT(const ModelConfig& c)
    : config(c),
      specs((check_model_shapes(c), check_vit_fits_memory(c, 0, false), vit_param_specs(c))) {
  num_params = specs.back().offset + specs.back().size;
  weights = Tensor1::from_shape({size_t(num_params)});
  grads = Tensor1::from_shape({size_t(num_params)});
  weights.fill(0.0f);
  grads.fill(0.0f);
  w = bind_params(weights.data(), specs, c.depth);
  g = bind_params(grads.data(), specs, c.depth);
}

const ParamSpec* ViT::find(const std::string& name) const {
  for (const auto& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}

void ViT::zero_grad() { std::fill(grads.begin(), grads.end(), 0.0f); }

void ViT::init(uint64_t seed) { init_params(weights.data(), specs, seed); }

// Clears a gradient buffer that backward then adds into: megabytes per layer, so both
// cores share the pass (one core's memset left the other waiting for about 5% of a step).
static void zero(float* p, int64_t n) {
  constexpr int64_t kChunk = 1 << 16;  // floats per piece: 256 KB
  const int64_t pieces = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (pieces > 1)
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t begin = i * kChunk, count = std::min(kChunk, n - begin);
    std::memset(p + begin, 0, size_t(count) * sizeof(float));
  }
}

// The gradient at a dropout's input from the one at its output: `dout` itself when p == 0
// (dropout is then the identity), else `scratch`, filled with dout * mask / (1 - p).
static const float* through_dropout(float* scratch, const float* dout, const uint8_t* mask,
                                    int64_t n, float p) {
  if (p == 0.0f) return dout;
  zero(scratch, n);
  dropout_backward(scratch, dout, mask, n, p);
  return scratch;
}

// out = x + branch (+ bias on every row, when the branch's linear layer left it out):
// the residual adds, with the bias fused in to save a pass over the branch.
static void residual_add(float* out, const float* x, const float* branch, const float* bias,
                         int64_t R, int D) {
#pragma omp parallel for schedule(static) if (R * D > 65536)
  for (int64_t r = 0; r < R; ++r) {
    const int64_t o = r * D;
    if (bias) {
#pragma omp simd
      for (int d = 0; d < D; ++d) out[o + d] = x[o + d] + branch[o + d] + bias[d];
    } else {
#pragma omp simd
      for (int d = 0; d < D; ++d) out[o + d] = x[o + d] + branch[o + d];
    }
  }
}

// Adds the time of a scope to a profile's attention_seconds, when there is a profile.
struct AttentionTimer {
  StepProfile* profile;
  std::chrono::steady_clock::time_point start;
  explicit AttentionTimer(StepProfile* p) : profile(p) {
    if (profile) start = std::chrono::steady_clock::now();
  }
  ~AttentionTimer() {
    if (profile)
      profile->attention_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

// Whether activations built for `built` hold every buffer a model of config `c` uses.
static bool built_for(const ModelConfig& built, const ModelConfig& c) {
  return built.image_size == c.image_size && built.channels == c.channels &&
         built.patch_size == c.patch_size && built.dim == c.dim && built.depth == c.depth &&
         built.heads == c.heads && built.mlp_dim == c.mlp_dim &&
         built.num_classes == c.num_classes && built.attention == c.attention &&
         built.pool == c.pool &&
         (built.dropout > 0.0f) == (c.dropout > 0.0f) &&
         (built.attention_dropout > 0.0f) == (c.attention_dropout > 0.0f);
}

static void check_forward(const ViT& model, const Activations& acts, const float* images, int B,
                          bool training) {
  if (!built_for(acts.config, model.config))
    throw Error(
        "vit_forward: the activations were built for another model (dim, depth, heads, "
        "mlp_dim, tokens, pooling, classes, attention form or dropout differ)");
  if (B < 1 || B > acts.max_batch)
    throw Error("vit_forward: batch " + std::to_string(B) + " is outside 1.." +
                std::to_string(acts.max_batch) + ", the batch the activations were built for");
  if (training && !acts.training)
    throw Error("vit_forward: a training forward needs activations built for training");
  if (!images) throw Error("vit_forward: no images");
}

static void check_backward(const ViT& model, const Activations& acts, int B) {
  if (!acts.training)
    throw Error("vit_backward: the activations were built for evaluation, not training");
  if (!built_for(acts.config, model.config))
    throw Error("vit_backward: the activations were built for another model");
  if (acts.forward_batch != B)
    throw Error("vit_backward: needs a vit_forward of batch " + std::to_string(B) +
                " first (the last forward was " +
                (acts.forward_batch == 0
                     ? std::string("none")
                     : std::string(acts.forward_was_training ? "a training" : "an evaluation") +
                           " one of batch " + std::to_string(acts.forward_batch)) +
                ")");
}

// Sites of dropout inside one block, so that every mask has its own stream.
enum DropoutSite : uint64_t { kSiteAttention = 0, kSiteProj = 1, kSiteGelu = 2, kSiteFc2 = 3 };

void vit_forward(const ViT& model, Activations& acts, const float* images, int B, bool training,
                 uint64_t dropout_key, int first_sample) {
  const ModelConfig& c = model.config;
  const ViTParams& w = model.w;
  const int T = c.tokens(), N = c.patches(), D = c.dim, M = c.mlp_dim, H = c.heads;
  const int K = c.num_classes;
  const int BT = B * T;
  const float p = training ? c.dropout : 0.0f;
  const float p_att = training ? c.attention_dropout : 0.0f;
  check_forward(model, acts, images, B, training);
  // Where this batch's elements start in the whole batch's buffers, per dropout site.
  const int64_t first_td = int64_t(first_sample) * T * D, first_tm = int64_t(first_sample) * T * M;
  const int64_t first_htt = int64_t(first_sample) * H * T * T;
  acts.forward_batch = 0;  // until this forward is complete

  patchify(acts.patches, images, B, c.channels, c.image_size, c.patch_size);
  linear_forward(acts.patch_proj, acts.patches, w.patch_w, w.patch_b, B * N,
                 c.patch_len(), D);
  // No pos_embed with model.pos_embed = none: w.pos_embed is null and nothing is added.
  if (c.has_cls_token())
    embed_tokens_forward(acts.blocks[0].x, acts.patch_proj, w.cls_token, w.pos_embed, B, N, D);
  else
    embed_patch_tokens_forward(acts.blocks[0].x, acts.patch_proj, w.pos_embed, B, N, D);

  for (int l = 0; l < c.depth; ++l) {
    const BlockParams& bw = w.blocks[size_t(l)];
    BlockActivations& a = acts.blocks[size_t(l)];
    const float* x = a.x;
    float* x_next = l + 1 < c.depth ? acts.blocks[size_t(l) + 1].x : acts.x_final;
    float* branch = acts.branch;
    auto key = [&](DropoutSite site) { return rng_key(dropout_key, uint64_t(l), site); };

    // x_mid = x + drop(proj(attn(LN1(x))))
    layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, bw.norm1_w,
                      bw.norm1_b, BT, D);
    linear_forward(a.qkv, a.ln1, bw.qkv_w, bw.qkv_b, BT, D, 3 * D);
    {
      AttentionTimer timer(acts.profile);
      const AttentionScore score{c.attention, bw.additive_v, bw.logit_scale};
      attention_forward(a.att_out, a.att, a.att_mask, a.qkv, B, T, D, H, score, p_att,
                        key(kSiteAttention), acts.attention_scratch, acts.attention_slots,
                        first_htt);
    }
    // Without dropout the projection's bias is added in the residual pass instead.
    const bool fuse_bias = p == 0.0f;
    linear_forward(branch, a.att_out, bw.proj_w, fuse_bias ? nullptr : bw.proj_b, BT, D, D);
    dropout_forward(branch, a.proj_mask, branch, int64_t(BT) * D, p, key(kSiteProj),
                    first_td);
    residual_add(a.resid_mid, x, branch, fuse_bias ? bw.proj_b : nullptr, BT, D);

    // x_next = x_mid + drop(fc2(drop(GELU(fc1(LN2(x_mid))))))
    layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.resid_mid,
                      bw.norm2_w, bw.norm2_b, BT, D);
    linear_forward(a.fc1, a.ln2, bw.fc1_w, nullptr, BT, D, M);
    bias_gelu_forward(a.fc2_in, a.fc1, bw.fc1_b, BT, M);
    dropout_forward(a.fc2_in, a.gelu_mask, a.fc2_in, int64_t(BT) * M, p, key(kSiteGelu),
                    first_tm);
    linear_forward(branch, a.fc2_in, bw.fc2_w, fuse_bias ? nullptr : bw.fc2_b, BT, M, D);
    dropout_forward(branch, a.fc2_mask, branch, int64_t(BT) * D, p, key(kSiteFc2),
                    first_td);
    residual_add(x_next, a.resid_mid, branch, fuse_bias ? bw.fc2_b : nullptr, BT, D);
  }

  // The head reads one row per image, the CLS token's or the mean of all tokens, so the
  // final LayerNorm runs on those rows alone.
  const float* last = acts.x_final;
  if (c.has_cls_token())
    for (int b = 0; b < B; ++b)
      std::copy_n(last + int64_t(b) * T * D, D, acts.pooled + int64_t(b) * D);
  else
    mean_pool_forward(acts.pooled, last, B, T, D);
  layernorm_forward(acts.pooled_norm, acts.pooled_mean, acts.pooled_rstd,
                    acts.pooled, w.norm_w, w.norm_b, B, D);
  linear_forward(acts.logits, acts.pooled_norm, w.head_w, w.head_b, B, D, K);
  acts.forward_batch = B;
  acts.forward_was_training = training;
}

void vit_backward(ViT& model, Activations& acts, int B) {
  const ModelConfig& c = model.config;
  const ViTParams& w = model.w;
  ViTParams& g = model.g;
  const int T = c.tokens(), N = c.patches(), D = c.dim, M = c.mlp_dim, H = c.heads;
  const int K = c.num_classes;
  const int BT = B * T;
  const int64_t BTD = int64_t(BT) * D, BTM = int64_t(BT) * M;
  check_backward(model, acts, B);
  // The backward of the last forward: after an evaluation one, of the model without dropout.
  const float p = acts.forward_was_training ? c.dropout : 0.0f;
  const float p_att = acts.forward_was_training ? c.attention_dropout : 0.0f;

  // logits = head(LN(pooled)); pooled = the CLS row, or the mean over the tokens
  zero(acts.dpooled_norm, int64_t(B) * D);
  linear_backward(acts.dpooled_norm, g.head_w, g.head_b, acts.dlogits,
                  acts.pooled_norm, w.head_w, B, D, K, acts.ones);
  zero(acts.dpooled, int64_t(B) * D);
  layernorm_backward(acts.dpooled, g.norm_w, g.norm_b, acts.dpooled_norm,
                     acts.pooled, w.norm_w, acts.pooled_mean, acts.pooled_rstd, B,
                     D, acts.layernorm_partials);
  float* dx = acts.dresid;
  zero(dx, BTD);
  if (c.has_cls_token())
    for (int b = 0; b < B; ++b)
      std::copy_n(acts.dpooled + int64_t(b) * D, D, dx + int64_t(b) * T * D);
  else
    mean_pool_backward(dx, acts.dpooled, B, T, D);

  for (int l = c.depth - 1; l >= 0; --l) {
    const BlockParams& bw = w.blocks[size_t(l)];
    BlockParams& bg = g.blocks[size_t(l)];
    BlockActivations& a = acts.blocks[size_t(l)];

    // x_next = x_mid + drop(fc2(fc2_in)): dx is d x_next here, and becomes d x_mid below.
    const float* dfc2_out = through_dropout(acts.dbranch, dx, a.fc2_mask, BTD, p);
    zero(acts.dfc2_in, BTM);
    linear_backward(acts.dfc2_in, bg.fc2_w, bg.fc2_b, dfc2_out, a.fc2_in,
                    bw.fc2_w, BT, M, D, acts.ones);
    // fc2_in = drop(GELU(fc1))
    const float* dgelu = through_dropout(acts.dgelu, acts.dfc2_in, a.gelu_mask, BTM, p);
    zero(acts.dfc1, BTM);
    gelu_backward(acts.dfc1, a.fc1, dgelu, BTM);
    // fc1 = linear(LN2(x_mid)); the residual path already carries dx into x_mid.
    zero(acts.dln, BTD);
    linear_backward(acts.dln, bg.fc1_w, bg.fc1_b, acts.dfc1, a.ln2,
                    bw.fc1_w, BT, D, M, acts.ones);
    layernorm_backward(dx, bg.norm2_w, bg.norm2_b, acts.dln, a.resid_mid,
                       bw.norm2_w, a.ln2_mean, a.ln2_rstd, BT, D, acts.layernorm_partials);

    // x_mid = x + drop(proj(att_out)): dx becomes d x.
    const float* dproj_out = through_dropout(acts.dbranch, dx, a.proj_mask, BTD, p);
    zero(acts.datt_out, BTD);
    linear_backward(acts.datt_out, bg.proj_w, bg.proj_b, dproj_out, a.att_out,
                    bw.proj_w, BT, D, D, acts.ones);
    if (a.att_grad)
      attention_weights_grad(a.att_grad, acts.datt_out, a.qkv, a.att_mask, B, T, D, H, p_att);
    zero(acts.dqkv, 3 * BTD);
    {
      AttentionTimer timer(acts.profile);
      const AttentionScore score{c.attention, bw.additive_v, bw.logit_scale};
      const AttentionScoreGrad dscore{bg.additive_v, bg.logit_scale, acts.score_grad_pairs};
      attention_backward(acts.dqkv, dscore, acts.datt_out, a.qkv, a.att, a.att_mask, B, T, D, H,
                         score, p_att, acts.attention_scratch, acts.attention_slots);
    }
    zero(acts.dln, BTD);
    linear_backward(acts.dln, bg.qkv_w, bg.qkv_b, acts.dqkv, a.ln1, bw.qkv_w, BT, D, 3 * D,
                    acts.ones);
    layernorm_backward(dx, bg.norm1_w, bg.norm1_b, acts.dln, a.x, bw.norm1_w, a.ln1_mean,
                       a.ln1_rstd, BT, D, acts.layernorm_partials);
  }

  // tokens = [cls;] patch_proj + pos;  patch_proj = linear(patches). A fixed sin-cos table
  // takes no gradient.
  float* dpos = c.pos_embed == PosEmbedKind::learned ? g.pos_embed : nullptr;
  zero(acts.dpatch_proj, int64_t(B) * N * D);
  if (c.has_cls_token())
    embed_tokens_backward(acts.dpatch_proj, g.cls_token, dpos, dx, B, N, D);
  else
    embed_patch_tokens_backward(acts.dpatch_proj, dpos, dx, B, N, D);
  linear_backward(nullptr, g.patch_w, g.patch_b, acts.dpatch_proj, acts.patches,
                  w.patch_w, B * N, c.patch_len(), D, acts.ones);
}

double vit_forward_flops(const ModelConfig& c) {
  const double T = c.tokens(), N = c.patches(), D = c.dim, M = c.mlp_dim, K = c.num_classes;
  const double per_block = 2 * T * D * 3 * D   // qkv
                           + 2 * 2 * T * T * D  // q k^T and P v over all heads
                           + 2 * T * D * D      // proj
                           + 2 * 2 * T * D * M; // fc1, fc2
  return 2 * N * c.patch_len() * D + c.depth * per_block + 2 * D * K;
}

}  // namespace minivit

namespace minivit {

double vit_train_flops(const ModelConfig& c) {
  const double patch_input_grad = 2.0 * c.patches() * c.patch_len() * c.dim;
  return 3 * vit_forward_flops(c) - patch_input_grad;
}

}  // namespace minivit

namespace minivit {

double vit_attention_flop_share(const ModelConfig& c) {
  const double T = c.tokens(), D = c.dim;
  return c.depth * 2 * 2 * T * T * D / vit_forward_flops(c);
}

}  // namespace minivit
