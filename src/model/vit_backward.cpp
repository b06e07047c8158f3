// The ViT's backward: block by block, the rows of the batch in chunks beside the weight
// gradients of the block after, in pieces (see vit_passes.h).
#include <algorithm>
#include <cstring>
#include <optional>

#include "minivit/core/error.h"
#include "minivit/model/vit.h"
#include "minivit/nn/attention.h"
#include "minivit/nn/gelu.h"
#include "minivit/nn/layernorm.h"
#include "minivit/nn/linear.h"
#include "minivit/nn/mean_pool.h"
#include "minivit/nn/patch_drop.h"
#include "minivit/nn/patch_embed.h"
#include "minivit/nn/seq_pool.h"
#include "conv_stem.h"
#include "vit_passes.h"

namespace minivit {
MINIVIT_ISA_BEGIN

using namespace vit_passes;

static void check_backward(const ViT& model, const Activations& acts, int B) {
  if (!acts.has_backward())
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

// Block l's set of gradient scratch (activations.h).
static BlockGradScratch& grad_scratch(Activations& acts, int l) {
  return acts.block_grads[size_t(l % 2)];
}

// A chunk of images [b0, b0 + n) in block l's backward: the block, the rates its forward
// ran at (p_block: this block's drop-path rate), and the chunk's shapes.
struct ChunkBackward : ChunkShape {
  const ViT& model;
  Activations& acts;
  float p, p_att, p_block;
  const BlockParams& bw;
  const BlockActivations& a;
  const BlockGradScratch& s;
  Products products;

  ChunkBackward(const ViT& model, Activations& acts, int l, int b0, int n, float p, float p_att,
                float p_block)
      : ChunkShape(model.config, b0, n, acts.forward_was_training), model(model), acts(acts),
        p(p), p_att(p_att), p_block(p_block), bw(model.w.blocks[size_t(l)]),
        a(acts.blocks[size_t(l)]), s(grad_scratch(acts, l)),
        products(acts.products(acts.forward_was_training)) {}
};

// x_next = x_mid + drop_path(drop(fc2(drop(GELU(fc1(LN2(x_mid))))))): from d_out, the
// gradient at x_next, to the one at x_mid, which it returns.
static const float* mlp_backward_rows(const ChunkBackward& k, const float* d_out) {
  const BlockActivations& a = k.a;
  const float* path_mlp = k.at(a.path_scale_mlp, 1);
  const float* dfc2_out = through_branch_drops(k.at(k.s.dbranch, k.TD), d_out,
                                               k.at(a.fc2_mask, k.TD), k.p, path_mlp, k.p_block,
                                               k.n, k.TD);
  // fc2_in = drop(GELU(fc1)). After a training forward fc1 holds GELU's slope, which the
  // product applies as it stores where no dropout mask comes between; after an evaluation
  // forward it holds GELU's input.
  float* dfc1 = k.at(k.s.dfc1, k.TM);
  const float* fc1 = k.at(a.fc1, k.TM);
  const bool slope_kept = k.acts.forward_was_training;
  const int64_t BTM = int64_t(k.BT) * k.M;
  if (k.p == 0.0f && slope_kept) {
    linear_backward_input_gelu(dfc1, dfc2_out, k.bw.fc2_w, fc1, k.BT, k.M, k.D, k.products);
  } else {
    // Without a dropout mask dgelu is dfc1 itself, which gelu.h allows as dout.
    linear_backward_input(dfc1, dfc2_out, k.bw.fc2_w, k.BT, k.M, k.D, false, k.products);
    const float* dgelu =
        through_dropout(k.at(k.acts.dgelu, k.TM), dfc1, k.at(a.gelu_mask, k.TM), BTM, k.p);
    if (slope_kept)
      gelu_backward_slope(dfc1, fc1, dgelu, BTM);
    else
      gelu_backward(dfc1, fc1, dgelu, BTM, false);
  }
  // fc1 = linear(LN2(x_mid)); the residual path carries d_out into x_mid.
  float* dln2 = k.at(k.s.dln, k.TD);
  float* d_mid = k.at(k.s.dresid_mid, k.TD);
  linear_backward_input(dln2, dfc1, k.bw.fc1_w, k.BT, k.D, k.M, false, k.products);
  layernorm_backward_input(d_mid, dln2, k.at(a.resid_mid, k.TD), k.bw.norm2_w,
                           k.at(a.ln2_mean, k.T), k.at(a.ln2_rstd, k.T), k.BT, k.D, d_out);
  return d_mid;
}

// x_mid = x + drop_path(drop(proj(attn(LN1(x))))): from d_mid, the gradient at x_mid, to
// d_in, the one at x.
static void attention_backward_rows(const ChunkBackward& k, const float* d_mid, float* d_in) {
  const ModelConfig& c = k.model.config;
  const BlockActivations& a = k.a;
  float* datt_out = k.at(k.acts.datt_out, k.TD);
  float* dqkv = k.at(k.s.dqkv, 3 * k.TD);
  float* dln1 = k.at(k.s.dln1, k.TD);
  const float* dproj_out =
      through_branch_drops(k.at(k.s.dbranch_att, k.TD), d_mid, k.at(a.proj_mask, k.TD), k.p,
                           k.at(a.path_scale_att, 1), k.p_block, k.n, k.TD);
  linear_backward_input(datt_out, dproj_out, k.bw.proj_w, k.BT, k.D, k.D, false, k.products);
  const float* qkv = k.at(a.qkv, 3 * k.TD);
  const uint8_t* att_mask = k.at(a.att_mask, k.HTT);
  if (a.att_grad)
    attention_weights_grad(k.at(a.att_grad, k.HTT), datt_out, qkv, att_mask, k.n, k.T, k.D, k.H,
                           k.p_att);
  {
    AttentionTimer timer(k.acts.profile);
    const AttentionScore score{c.attention, k.bw.additive_v, k.bw.logit_scale};
    const AttentionScoreGrad dscore{nullptr, nullptr,
                                    k.at(k.s.score_grad_pairs, int64_t(k.H) * c.head_dim())};
    attention_backward_pairs(dqkv, dscore, datt_out, qkv, k.at(a.att, k.HTT), att_mask, k.n,
                             k.T, k.D, k.H, score, k.p_att, k.acts.attention_scratch,
                             k.acts.attention_slots);
  }
  linear_backward_input(dln1, dqkv, k.bw.qkv_w, k.BT, k.D, 3 * k.D, false, k.products);
  layernorm_backward_input(d_in, dln1, k.at(a.x, k.TD), k.bw.norm1_w, k.at(a.ln1_mean, k.T),
                           k.at(a.ln1_rstd, k.T), k.BT, k.D, d_mid);
}

// The backward of images [b0, b0 + n) through block l, down to the gradient at the
// block's input: everything whose rows are independent. The weight gradients, which sum
// over the whole batch, are BlockParamPieces' below.
static void block_backward_rows(const ViT& model, Activations& acts, int l, int b0, int n,
                                float p, float p_att, float p_block, const float* d_out,
                                float* d_in) {
  const ChunkBackward chunk(model, acts, l, b0, n, p, p_att, p_block);
  const int64_t TD = chunk.TD;
  const float* d_mid = mlp_backward_rows(chunk, chunk.at(d_out, TD));
  attention_backward_rows(chunk, d_mid, chunk.at(d_in, TD));
}

// Block l's weight gradients from the whole batch's rows that block_backward_rows left,
// as a list of pieces of about equal work (linear.h) that threads take one at a time; each
// piece sums over the batch in row order, so which thread takes it changes no bit. The
// linear layers' pieces come first, then the two LayerNorms and the score parameters.
class BlockParamPieces {
 public:
  // d_out: the gradient at block l's output.
  BlockParamPieces(ViT& model, Activations& acts, int l, int B, float p, float p_block,
                   const float* d_out)
      : c_(model.config),
        acts_(acts),
        bg_(model.g.blocks[size_t(l)]),
        a_(acts.blocks[size_t(l)]),
        s_(grad_scratch(acts, l)),
        B_(B),
        BT_(B * c_.pass_tokens(acts.forward_was_training)),
        products_(acts.products(acts.forward_was_training)) {
    const int D = c_.dim, M = c_.mlp_dim;
    const bool in_scratch = branch_grad_in_scratch(p, p_block);
    const float* dfc2_out = in_scratch ? s_.dbranch : d_out;
    const float* dproj_out = in_scratch ? s_.dbranch_att : s_.dresid_mid;
    layers_[0] = {bg_.fc2_w, bg_.fc2_b, dfc2_out, a_.fc2_in, M, D};
    layers_[1] = {bg_.fc1_w, bg_.fc1_b, s_.dfc1, a_.ln2, D, M};
    layers_[2] = {bg_.proj_w, bg_.proj_b, dproj_out, a_.att_out, D, D};
    layers_[3] = {bg_.qkv_w, bg_.qkv_b, s_.dqkv, a_.ln1, D, 3 * D};
    for (int i = 0; i < kLayers; ++i)
      first_piece_[i + 1] = first_piece_[i] + linear_param_pieces(layers_[i].I, layers_[i].O);
  }

  int count() const { return first_piece_[kLayers] + 3; }

  void run(int piece) const {
    if (piece < first_piece_[kLayers]) {
      int i = 0;
      while (piece >= first_piece_[i + 1]) ++i;
      const Layer& L = layers_[i];
      linear_backward_params(L.dweight, L.dbias, L.dout, L.inp, BT_, L.I, L.O,
                             piece - first_piece_[i], products_);
      return;
    }
    const int D = c_.dim;
    float* partials = acts_.layernorm_partials;
    switch (piece - first_piece_[kLayers]) {
      case 0:
        layernorm_backward_params(bg_.norm2_w, bg_.norm2_b, s_.dln, a_.resid_mid, a_.ln2_mean,
                                  a_.ln2_rstd, BT_, D, partials);
        break;
      case 1:
        layernorm_backward_params(bg_.norm1_w, bg_.norm1_b, s_.dln1, a_.x, a_.ln1_mean,
                                  a_.ln1_rstd, BT_, D, partials + layernorm_partials_floats(D));
        break;
      case 2:
        attention_add_score_grads({bg_.additive_v, bg_.logit_scale, s_.score_grad_pairs}, B_,
                                  c_.heads, c_.head_dim(), c_.attention);
        break;
    }
  }

 private:
  static constexpr int kLayers = 4;
  struct Layer {
    float *dweight, *dbias;
    const float *dout, *inp;
    int I, O;
  };
  const ModelConfig& c_;
  const Activations& acts_;
  BlockParams& bg_;
  const BlockActivations& a_;
  const BlockGradScratch& s_;
  const int B_, BT_;
  const Products products_;
  Layer layers_[kLayers] = {};
  int first_piece_[kLayers + 1] = {0};
};

// Calls task(i) for i < tasks across the pool, one task at a time to whichever thread is
// free, or in order on the calling thread.
template <class Task>
void for_each_task(int tasks, int max_threads, Task&& task) {
  const int threads = std::min({num_threads(), max_threads, tasks});
  if (threads > 1) {
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int i = 0; i < tasks; ++i) task(i);
  } else {
    for (int i = 0; i < tasks; ++i) task(i);
  }
}

// From acts.dlogits: logits = head(LN(pooled)); pooled = the CLS row, or the mean over the
// tokens; or, with sequence pooling, logits = head(seq_pool(LN(tokens))). With sequence
// pooling it leaves d_out (B, T, D), the gradient at the last block's output; else the
// gradient at the pooled rows, acts.dpooled (B, D), which pooled_backward_rows spreads over
// the tokens image by image, in the last block's chunks.
static void head_backward(ViT& model, Activations& acts, int B, int T, float* d_out) {
  const ModelConfig& c = model.config;
  const ViTParams& w = model.w;
  ViTParams& g = model.g;
  const int D = c.dim, K = c.num_classes;
  const int64_t BTD = int64_t(B) * T * D;
  zero(acts.dpooled_norm, int64_t(B) * D);
  linear_backward(acts.dpooled_norm, g.head_w, g.head_b, acts.dlogits,
                  acts.pooled_norm, w.head_w, B, D, K, acts.products(false));
  if (c.pool == PoolKind::seq) {
    zero(d_out, BTD);
    zero(acts.dtoken_norm, BTD);
    seq_pool_backward(acts.dtoken_norm, g.pool_w, acts.dpooled_norm,
                      acts.pool_weights, acts.token_norm, w.pool_w, B, T, D,
                      acts.pool_score_grads);
    layernorm_backward(d_out, g.norm_w, g.norm_b, acts.dtoken_norm, acts.x_final, w.norm_w,
                       acts.token_mean, acts.token_rstd, B * T, D, acts.layernorm_partials);
  } else {
    zero(acts.dpooled, int64_t(B) * D);
    layernorm_backward(acts.dpooled, g.norm_w, g.norm_b, acts.dpooled_norm,
                       acts.pooled, w.norm_w, acts.pooled_mean, acts.pooled_rstd, B,
                       D, acts.layernorm_partials);
  }
}

// d_out (n, T, D) of images [b0, b0 + n), the gradient at the last block's output, from
// acts.dpooled: all of it at the CLS row, or a T-th at every token. Nothing with sequence
// pooling, whose head_backward wrote d_out whole.
static void pooled_backward_rows(const ViT& model, Activations& acts, int b0, int n, int T,
                                 float* d_out) {
  const ModelConfig& c = model.config;
  const int D = c.dim;
  const int64_t TD = int64_t(T) * D;
  if (c.pool == PoolKind::seq) return;
  float* rows = at_image(d_out, b0, TD);
  const float* dpooled = at_image(acts.dpooled, b0, D);
  if (c.has_cls_token()) {
    std::fill_n(rows, n * TD, 0.0f);
    for (int b = 0; b < n; ++b) std::copy_n(dpooled + int64_t(b) * D, D, rows + b * TD);
  } else {
    mean_pool_backward(rows, dpooled, n, T, D, false);
  }
}

// The gradients of the token embedding from dx (B, tokens, D), the gradient at every
// token: tokens = [cls;] patch_proj + pos;  patch_proj = linear(patches), and behind a conv
// stem, the stem's.
static void embedding_backward(ViT& model, Activations& acts, int B, const float* dx) {
  const ModelConfig& c = model.config;
  const ViTParams& w = model.w;
  ViTParams& g = model.g;
  const int N = c.patches(), D = c.dim;
  // A fixed sin-cos table takes no gradient.
  float* dpos = c.pos_embed == PosEmbedKind::learned ? g.pos_embed : nullptr;
  if (c.has_cls_token())
    embed_tokens_backward(acts.dpatch_proj, g.cls_token, dpos, dx, B, N, D);
  else
    embed_patch_tokens_backward(acts.dpatch_proj, dpos, dx, B, N, D);
  // Behind a conv stem the projection's input takes a gradient too; patch pixels do not.
  // After a forward that ran the projection on the kept patches alone, that gradient is the
  // kept rows'; the weight gradient still sums over every patch, so that its sums are cut
  // into blocks and pieces as over every patch, and the products skip a dropped one's zero
  // rows.
  const bool stem = c.stem_stages() > 0;
  const bool kept_only = c.drops_patches(acts.forward_was_training);
  const int PL = c.patch_len(), kept = c.kept_patches();
  if (kept_only) {
    for (int piece = 0; piece < linear_param_pieces(PL, D); ++piece)
      linear_backward_params(g.patch_w, g.patch_b, acts.dpatch_proj, acts.patches, B * N, PL, D,
                             piece, acts.products(false), acts.patch_keep);
    if (stem) {
      for_ranges(B, B >= 16, [&](int64_t b0, int64_t b1) {
        patch_drop_forward(acts.dkept_patch_proj + b0 * kept * D, acts.dpatch_proj + b0 * N * D,
                           acts.patch_keep + b0 * N, int(b1 - b0), 0, N, kept, D);
      });
      linear_backward_input(acts.dkept_patches, acts.dkept_patch_proj, w.patch_w, B * kept, PL,
                            D, false, acts.products(false));
    }
  } else {
    if (stem)
      linear_backward_input(acts.dpatches, acts.dpatch_proj, w.patch_w, B * N, PL, D, false,
                            acts.products(false));
    linear_backward(nullptr, g.patch_w, g.patch_b, acts.dpatch_proj, acts.patches, w.patch_w,
                    B * N, PL, D, acts.products(false));
  }
  if (stem) stem_backward(model, acts, B, kept_only);
}

void vit_backward(ViT& model, Activations& acts, int B) {
  const ModelConfig& c = model.config;
  // The tokens the blocks saw: with patch dropout in training, the kept ones.
  const int T = c.pass_tokens(acts.forward_was_training), D = c.dim;
  check_backward(model, acts, B);
  // The backward of the last forward: after an evaluation one, of the model without dropout.
  const float p = acts.forward_was_training ? c.dropout : 0.0f;
  const float p_att = acts.forward_was_training ? c.attention_dropout : 0.0f;
  const float p_path = acts.forward_was_training ? c.drop_path : 0.0f;

  // Block l's output gradient, and its input's, which is the output gradient of block l - 1.
  auto grad_at_output = [&](int l) { return acts.dresid((c.depth - 1 - l) % 3); };
  head_backward(model, acts, B, T, grad_at_output(c.depth - 1));
  // Block l's rows in chunks, and in the same parallel region the weight gradients of block
  // l + 1, whose rows are done: one region a block rather than two, so that the end of one
  // list of tasks fills the other's. The chunks, the longest tasks, go first and the pieces
  // after them, the smallest last, so that a thread left without work at the region's end
  // waits for at most a piece. A single chunk runs on the calling thread, its layers
  // splitting their rows (vit_passes.h).
  const int chunks = (B + kChunkImages - 1) / kChunkImages;
  std::optional<BlockParamPieces> after;  // block l + 1's weight gradients
  auto run_after = [&](int piece) { after->run(piece); };
  for (int l = c.depth - 1; l >= 0; --l) {
    const float p_block = drop_path_rate(p_path, l, c.depth);
    const float* d_out = grad_at_output(l);
    float* d_in = grad_at_output(l - 1);
    auto rows = [&](int b0, int n) {
      if (l == c.depth - 1) pooled_backward_rows(model, acts, b0, n, T, grad_at_output(l));
      block_backward_rows(model, acts, l, b0, n, p, p_att, p_block, d_out, d_in);
    };
    const int pieces = after ? after->count() : 0;
    if (chunks > 1) {
      for_each_task(chunks + pieces, acts.attention_slots, [&](int task) {
        if (task >= chunks) return run_after(task - chunks);
        const int b0 = task * kChunkImages;
        rows(b0, std::min(kChunkImages, B - b0));
      });
    } else {
      for_each_task(pieces, pieces, run_after);
      rows(0, B);
    }
    after.emplace(model, acts, l, B, p, p_block, d_out);
  }
  for_each_task(after->count(), after->count(), run_after);
  const float* dx = grad_at_output(-1);
  if (c.drops_patches(acts.forward_was_training)) {
    // The gradient at every token, a dropped patch's zero. Without a CLS token the tokens
    // are the patch projection's rows, whose gradient buffer takes it in place; else a
    // buffer free now does.
    float* every_token = c.has_cls_token() ? grad_at_output(-2) : acts.dpatch_proj;
    patch_drop_backward(every_token, dx, acts.patch_keep, B, c.prefix_tokens(), c.patches(),
                        c.kept_patches(), D, false);
    dx = every_token;
  }
  embedding_backward(model, acts, B, dx);
}

MINIVIT_ISA_END
}  // namespace minivit
