#include "minivit/model/vit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include <omp.h>

#include "minivit/core/error.h"
#include "minivit/core/rng.h"
#include "conv_stem.h"
#include "vit_passes.h"
#include "minivit/kernels/threads.h"
#include "minivit/nn/attention.h"
#include "minivit/nn/drop_path.h"
#include "minivit/nn/dropout.h"
#include "minivit/nn/gelu.h"
#include "minivit/nn/layernorm.h"
#include "minivit/nn/linear.h"
#include "minivit/nn/mean_pool.h"
#include "minivit/nn/patch_drop.h"
#include "minivit/nn/patch_embed.h"
#include "minivit/nn/seq_pool.h"

// The forward pass, compiled once per instruction-set level (kernels/isa.h).
namespace minivit {
MINIVIT_ISA_BEGIN

using namespace vit_passes;

// out = x + branch: the residual add after a branch with dropout or drop path.
static void residual_add(float* out, const float* x, const float* branch, int64_t R, int D) {
  for_ranges(R, R * D > 65536, [&](int64_t r0, int64_t r1) {
#pragma omp simd
    for (int64_t i = r0 * D; i < r1 * D; ++i) out[i] = x[i] + branch[i];
  });
}

static void check_forward(const ViT& model, const Activations& acts, const float* images, int B,
                          bool training) {
  if (!built_for(acts.config, model.config))
    throw Error(
        "vit_forward: the activations were built for another model (dim, depth, heads, "
        "mlp_dim, tokens, pooling, patch embedding, classes, attention form or dropout differ)");
  if (B < 1 || B > acts.max_batch)
    throw Error("vit_forward: batch " + std::to_string(B) + " is outside 1.." +
                std::to_string(acts.max_batch) + ", the batch the activations were built for");
  if (training && !acts.has_backward())
    throw Error("vit_forward: a training forward needs activations built for training");
  if (!images) throw Error("vit_forward: no images");
}

// Sites of random draws inside one block (dropout masks, drop-path decisions), so that each
// has its own stream.
enum DropoutSite : uint64_t {
  kSiteAttention = 0,
  kSiteProj = 1,
  kSiteGelu = 2,
  kSiteFc2 = 3,
  kSitePathAtt = 4,
  kSitePathMlp = 5,
  kSitePatchDrop = 6,  // the patches each image keeps, drawn once, under block 0's key
};

// Images [b0, b0 + n) of the batch (`images` at image b0) to the first block's input:
// patches or the conv stem, the projection, the CLS token and position embedding, and in
// training the patches each image keeps, drawn at sample `first`.
static void embed_forward_chunk(const ViT& model, Activations& acts, const float* images, int b0,
                                int n, bool training, uint64_t dropout_key, int64_t first) {
  const ModelConfig& c = model.config;
  const ViTParams& w = model.w;
  const int N = c.patches(), D = c.dim, PL = c.patch_len(), K = c.kept_patches();
  auto at = [b0](auto* buffer, int64_t per_image) { return at_image(buffer, b0, per_image); };
  float* patches = at(acts.patches, int64_t(N) * PL);
  const bool drop_patches = c.drops_patches(training);
  uint8_t* keep = drop_patches ? at(acts.patch_keep, N) : nullptr;
  if (drop_patches)
    patch_drop_draw(keep, at(acts.patch_draws, N), n, N, K,
                    rng_key(dropout_key, 0, kSitePatchDrop), first);
  // With patch dropout the projection runs on the kept patches alone (behind a conv stem its
  // last stage too), and the first block's input takes their tokens straight from it.
  const bool stem = c.patch_embed == PatchEmbedKind::conv;
  const LinearWeight patch_w{w.patch_w, acts.weight_columns(acts.patch_w_t)};
  // A training forward leaves GELU's slope in place of its input, which is all backward
  // needs; an evaluation forward (validation's, the gradient rollout's) spares the exp.
  if (stem)
    stem_forward_chunk(model, acts, images, b0, n, training, keep);
  else
    patchify(patches, images, n, c.channels, c.image_size, c.patch_size,
             c.patch_embed == PatchEmbedKind::shifted);
  float* first_block_x = at(acts.blocks[0].x, int64_t(c.pass_tokens(training)) * D);
  // No pos_embed with model.pos_embed = none: w.pos_embed is null and nothing is added.
  const float* cls_token = c.has_cls_token() ? w.cls_token : nullptr;
  if (drop_patches) {
    float* kept_patches = at(acts.kept_patches, int64_t(K) * PL);
    if (!stem) patch_drop_forward(kept_patches, patches, keep, n, 0, N, K, PL);
    float* kept_proj = at(acts.kept_patch_proj, int64_t(K) * D);
    linear_forward(kept_proj, kept_patches, patch_w, w.patch_b, n * K, PL, D,
                   acts.products(false));
    return embed_tokens_forward(first_block_x, kept_proj, cls_token, w.pos_embed, n, N, D, keep,
                                K);
  }
  float* patch_proj = at(acts.patch_proj, int64_t(N) * D);
  linear_forward(patch_proj, patches, patch_w, w.patch_b, n * N, PL, D, acts.products(false));
  embed_tokens_forward(first_block_x, patch_proj, cls_token, w.pos_embed, n, N, D);
}

// A chunk of images [b0, b0 + n) in block l's forward: the block, its rates (p_block: its
// drop-path rate), the chunk's shapes and dropout streams (from sample `first`), and the
// window of its BT token rows that the layers outside the attention core take: all of them,
// or one thread's share where the threads of a region split the chunk (forward_split,
// evaluation: no dropout or drop path, whose draws go by image).
struct ChunkForward : ChunkShape {
  const ViT& model;
  Activations& acts;
  int l;
  bool training;
  float p, p_att, p_block;
  uint64_t dropout_key;
  int64_t first;
  Products products;
  const BlockParams& bw;
  const BlockActivations& a;
  int r0 = 0, rows = BT;  // the window: rows [r0, r0 + rows) of the chunk's BT

  ChunkForward(const ViT& model, Activations& acts, int l, int b0, int n, bool training, float p,
               float p_att, float p_block, uint64_t dropout_key, int64_t first,
               Products products)
      : ChunkShape(model.config, b0, n, training), model(model), acts(acts), l(l),
        training(training), p(p), p_att(p_att), p_block(p_block), dropout_key(dropout_key),
        first(first), products(products), bw(model.w.blocks[size_t(l)]),
        a(acts.blocks[size_t(l)]) {}

  uint64_t key(DropoutSite site) const { return rng_key(dropout_key, uint64_t(l), site); }
  // A buffer of `width` floats a token row at the window's first row; null stays null.
  template <class V>
  V* row(V* buffer, int64_t width) const {
    return buffer ? buffer + (int64_t(b0) * T + r0) * width : buffer;
  }
  // The dropout stream's index of the window's first element, `width` floats a row.
  int64_t first_element(int64_t width) const { return (first * T + r0) * width; }
  LinearWeight weight(const float* rows, const float* transposed) const {
    return LinearWeight{rows, acts.weight_columns(transposed)};
  }
};

// out = residual + drop_path(drop(inp W^T + b)), one of the block's two residual
// connections. Without dropout or drop path on the branch, the product adds the residual
// and its bias as it stores (linear_residual_forward).
static void residual_branch(const ChunkForward& k, float* out, const float* residual,
                            const float* inp, LinearWeight weight, const float* bias, int I,
                            uint8_t* mask, DropoutSite drop_site, float* path_scale,
                            DropoutSite path_site) {
  if (k.p == 0.0f && k.p_block == 0.0f)
    return linear_residual_forward(out, inp, weight, bias, residual, k.rows, I, k.D, k.products);
  float* branch = k.row(k.acts.branch, k.D);
  linear_forward(branch, inp, weight, bias, k.rows, I, k.D, k.products);
  dropout_forward(branch, mask, branch, int64_t(k.rows) * k.D, k.p, k.key(drop_site),
                  k.first_element(k.D));
  if (k.p_block > 0.0f)  // by image: the window is the whole chunk
    drop_path_forward(branch, path_scale, k.n, k.TD, k.p_block, k.key(path_site), k.first);
  residual_add(out, residual, branch, k.rows, k.D);
}

// LN1(x) and its qkv product, on the window's rows.
static void norm_qkv_rows(const ChunkForward& k) {
  const BlockParams& bw = k.bw;
  const BlockActivations& a = k.a;
  float* ln1 = k.row(a.ln1, k.D);
  layernorm_forward(ln1, k.row(a.ln1_mean, 1), k.row(a.ln1_rstd, 1), k.row(a.x, k.D),
                    bw.norm1_w, bw.norm1_b, k.rows, k.D);
  linear_forward(k.row(a.qkv, 3 * k.D), ln1, k.weight(bw.qkv_w, a.qkv_w_t), bw.qkv_b, k.rows,
                 k.D, 3 * k.D, k.products);
}

static AttentionScore attention_score(const ModelConfig& c, const BlockParams& bw) {
  return AttentionScore{c.attention, bw.additive_v, bw.logit_scale};
}

// x_mid = x + drop_path(drop(proj(attention))), into a.resid_mid, on the window's rows.
static void proj_rows(const ChunkForward& k) {
  const BlockActivations& a = k.a;
  residual_branch(k, k.row(a.resid_mid, k.D), k.row(a.x, k.D), k.row(a.att_out, k.D),
                  k.weight(k.bw.proj_w, a.proj_w_t), k.bw.proj_b, k.D, k.row(a.proj_mask, k.D),
                  kSiteProj, k.at(a.path_scale_att, 1), kSitePathAtt);
}

// x_mid = x + drop_path(drop(proj(attn(LN1(x))))), into a.resid_mid: the whole chunk.
static void attention_forward_rows(const ChunkForward& k) {
  const BlockActivations& a = k.a;
  norm_qkv_rows(k);
  {
    AttentionTimer timer(k.acts.profile);
    attention_forward(k.at(a.att_out, k.TD), k.at(a.att, k.HTT), k.at(a.att_mask, k.HTT),
                      k.at(a.qkv, 3 * k.TD), k.n, k.T, k.D, k.H,
                      attention_score(k.model.config, k.bw), k.p_att, k.key(kSiteAttention),
                      k.acts.attention_scratch, k.acts.attention_slots, k.first * k.HTT);
  }
  proj_rows(k);
}

// x_next = x_mid + drop_path(drop(fc2(drop(GELU(fc1(LN2(x_mid))))))), into the next block's
// x (or x_final), on the window's rows.
static void mlp_forward_rows(const ChunkForward& k) {
  const ModelConfig& c = k.model.config;
  const BlockParams& bw = k.bw;
  const BlockActivations& a = k.a;
  const float* resid_mid = k.row(a.resid_mid, k.D);
  float* ln2 = k.row(a.ln2, k.D);
  float *fc1 = k.row(a.fc1, k.M), *fc2_in = k.row(a.fc2_in, k.M);
  float* x_next =
      k.row(k.l + 1 < c.depth ? k.acts.blocks[size_t(k.l) + 1].x : k.acts.x_final, k.D);
  layernorm_forward(ln2, k.row(a.ln2_mean, 1), k.row(a.ln2_rstd, 1), resid_mid, bw.norm2_w,
                    bw.norm2_b, k.rows, k.D);
  linear_gelu_forward(fc1, fc2_in, ln2, k.weight(bw.fc1_w, a.fc1_w_t), bw.fc1_b, k.rows, k.D,
                      k.M, k.products, k.training);
  dropout_forward(fc2_in, k.row(a.gelu_mask, k.M), fc2_in, int64_t(k.rows) * k.M, k.p,
                  k.key(kSiteGelu), k.first_element(k.M));
  residual_branch(k, x_next, resid_mid, fc2_in, k.weight(bw.fc2_w, a.fc2_w_t), bw.fc2_b, k.M,
                  k.row(a.fc2_mask, k.D), kSiteFc2, k.at(a.path_scale_mlp, 1), kSitePathMlp);
}

// Images [b0, b0 + n) of the batch through block l, from its input x to the next block's
// (or x_final): every buffer is addressed at image b0, the dropout streams at sample `first`.
static void block_forward_rows(const ViT& model, Activations& acts, int l, int b0, int n,
                               bool training, float p, float p_att, float p_block,
                               uint64_t dropout_key, int64_t first, Products products) {
  const ChunkForward chunk(model, acts, l, b0, n, training, p, p_att, p_block, dropout_key,
                           first, products);
  attention_forward_rows(chunk);
  mlp_forward_rows(chunk);
}

// The logits of images [b0, b0 + n) from the last block's output.
static void head_forward_rows(const ViT& model, Activations& acts, int b0, int n, bool training) {
  const ModelConfig& c = model.config;
  const ViTParams& w = model.w;
  const int T = c.pass_tokens(training), D = c.dim, K = c.num_classes;
  const int64_t TD = int64_t(T) * D;
  const int BT = n * T;
  auto at = [b0](auto* buffer, int64_t per_image) { return at_image(buffer, b0, per_image); };
  // The head reads one row per image, the CLS token's or the mean of all tokens, so the
  // final LayerNorm runs on those rows alone; sequence pooling scores the normalised tokens,
  // so there it runs on every token first.
  const float* last = at(acts.x_final, TD);
  float* pooled = at(acts.pooled, D);
  float* pooled_norm = at(acts.pooled_norm, D);
  if (c.pool == PoolKind::seq) {
    float* token_norm = at(acts.token_norm, TD);
    layernorm_forward(token_norm, at(acts.token_mean, T), at(acts.token_rstd, T), last,
                      w.norm_w, w.norm_b, BT, D);
    seq_pool_forward(pooled_norm, at(acts.pool_weights, T), token_norm, w.pool_w, n, T, D);
  } else {
    if (c.has_cls_token())
      for (int b = 0; b < n; ++b)
        std::copy_n(last + int64_t(b) * TD, D, pooled + int64_t(b) * D);
    else
      mean_pool_forward(pooled, last, n, T, D);
    layernorm_forward(pooled_norm, at(acts.pooled_mean, 1), at(acts.pooled_rstd, 1), pooled,
                      w.norm_w, w.norm_b, n, D);
  }
  linear_forward(at(acts.logits, K), pooled_norm, w.head_w, w.head_b, n, D, K,
                 acts.products(false));
}

// The forward of images [b0, b0 + n) of the batch: every buffer is addressed at image b0,
// and the dropout streams at sample first_sample + b0.
static void forward_chunk(const ViT& model, Activations& acts, const float* images, int b0,
                          int n, bool training, float p, float p_att, float p_path,
                          uint64_t dropout_key, int first_sample, Products products) {
  const ModelConfig& c = model.config;
  const int64_t first = int64_t(first_sample) + b0;
  const int64_t image_len = int64_t(c.channels) * c.image_size * c.image_size;
  embed_forward_chunk(model, acts, images + b0 * image_len, b0, n, training, dropout_key, first);
  for (int l = 0; l < c.depth; ++l)
    block_forward_rows(model, acts, l, b0, n, training, p, p_att,
                       drop_path_rate(p_path, l, c.depth), dropout_key, first, products);
  head_forward_rows(model, acts, b0, n, training);
}

// A batch of one chunk (kChunkImages images or fewer: a prediction of a few, one image's
// latency) would go to one thread whole (for_each_chunk), its layers too small to split
// each in a region of its own. Its threads split it in one region instead: LayerNorm and
// the products by rows, the attention core by (image, head) pairs, with a barrier on each
// side of the core, which reads every row of an image. Products cut by rows round as whole
// ones on minivit's kernels (gemm.h), so the bits are those of one thread; OpenBLAS's would
// round the cut rows otherwise, so under it the chunk stays on one thread. Each thread
// takes kMinSplitRows rows at least, about three of the kernels' tiles.
constexpr int kMinSplitRows = 16;

static int split_threads(const ModelConfig& c, const Activations& acts, int B,
                         Products products) {
  if (B > kChunkImages || products.kernels == GemmKernels::openblas || omp_in_parallel())
    return 1;
  const int rows = B * c.pass_tokens(false);
  return std::max(1, std::min({num_threads(), acts.attention_slots, rows / kMinSplitRows,
                               B * c.heads}));
}

// The evaluation forward of a batch of one chunk on `threads` threads (split_threads).
static void forward_split(const ViT& model, Activations& acts, const float* images, int B,
                          int threads, Products products) {
  const ModelConfig& c = model.config;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), team = omp_get_num_threads();
#pragma omp single
    embed_forward_chunk(model, acts, images, 0, B, false, 0, 0);
    for (int l = 0; l < c.depth; ++l) {
      ChunkForward k(model, acts, l, 0, B, false, 0.0f, 0.0f, 0.0f, 0, 0, products);
      k.r0 = k.BT * t / team;
      k.rows = k.BT * (t + 1) / team - k.r0;
      norm_qkv_rows(k);
#pragma omp barrier
      const int pairs = B * k.H;
      attention_forward_pairs(k.at(k.a.att_out, k.TD), k.at(k.a.att, k.HTT),
                              k.at(k.a.qkv, 3 * k.TD), k.T, k.D, k.H, attention_score(c, k.bw),
                              acts.attention_scratch, acts.attention_slots, pairs * t / team,
                              pairs * (t + 1) / team);
#pragma omp barrier
      proj_rows(k);
      mlp_forward_rows(k);
    }
#pragma omp barrier
#pragma omp single
    head_forward_rows(model, acts, 0, B, false);
  }
}

void vit_forward(const ViT& model, Activations& acts, const float* images, int B, bool training,
                 uint64_t dropout_key, int first_sample) {
  const ModelConfig& c = model.config;
  const float p = training ? c.dropout : 0.0f;
  const float p_att = training ? c.attention_dropout : 0.0f;
  const float p_path = training ? c.drop_path : 0.0f;
  check_forward(model, acts, images, B, training);
  acts.forward_batch = 0;  // until this forward is complete
  if (training || acts.forward_weights_held != model.weights.data())
    make_forward_weights(model, acts);

  const Products products = acts.products(training);
  const int split = training ? 1 : split_threads(c, acts, B, products);
  if (split > 1)
    forward_split(model, acts, images, B, split, products);
  else
    for_each_chunk(B, acts.attention_slots, [&](int b0, int n) {
      forward_chunk(model, acts, images, b0, n, training, p, p_att, p_path, dropout_key,
                    first_sample, products);
    });
  acts.forward_batch = B;
  acts.forward_was_training = training;
}

MINIVIT_ISA_END
}  // namespace minivit
