#pragma once
// The run state: every buffer one wave of activations needs (what forward keeps for
// backward, backward's gradient scratch, and the layers' own scratch), carved from two
// flat buffers sized once for the largest batch, so a step allocates nothing.
//
// One table (activations.cpp) describes each buffer once: its name, the field that points
// at it, its shape in the dimension letters of tensor.h, and when it is needed (always,
// for training, with dropout, with attention dropout). Allocation, bytes(), and the memory
// guard (vit_memory_bytes) all walk that table, so they cannot drift apart.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "minivit/core/config.h"
#include "minivit/core/tensor.h"
#include "minivit/kernels/compute.h"
#include "minivit/nn/linear.h"  // reads_weight_columns

namespace minivit {

// What a set of activations is built for, which decides the buffers it holds.
enum class ActivationsFor {
  training,     // forward and backward: what each block's backward reads, and its scratch
  evaluation,   // forward alone, nothing of a block read after the pass: the blocks take
                // turns on one set of buffers (each keeps its own weight transposes), so a
                // chunk of images finds the last block's rows in cache and a pass writes a
                // block's worth of memory instead of the whole model's
  inspection,   // forward alone, every block's buffers kept to be read after the pass
                // (the attention maps)
  explanation,  // training's, and backward's gradient at every block's attention weights
};

// Whether activations built for `use` hold backward's buffers and the dropout masks.
constexpr bool runs_backward(ActivationsFor use) {
  return use == ActivationsFor::training || use == ActivationsFor::explanation;
}

struct BlockActivations {
  float* x;          // (B, T, D) the residual stream entering the block
  float* ln1;        // (B, T, D)
  float* ln1_mean;   // (B, T)
  float* ln1_rstd;   // (B, T)
  float* qkv;        // (B, T, 3D)
  float* att;        // (B, H, T, T) softmax weights, before dropout
  uint8_t* att_mask; // (B, H, T, T) when attention_dropout > 0 in training
  float* att_out;    // (B, T, D) heads concatenated, input of proj
  uint8_t* proj_mask;  // (B, T, D) when dropout > 0 in training
  float* resid_mid;  // (B, T, D) residual stream between attention and MLP
  float* ln2;        // (B, T, D)
  float* ln2_mean;   // (B, T)
  float* ln2_rstd;   // (B, T)
  float* fc1;        // (B, T, M) before GELU; after a training forward, GELU's slope there,
                     // which backward multiplies by
  float* fc2_in;     // (B, T, M) dropout(GELU(fc1))
  uint8_t* gelu_mask;  // (B, T, M) when dropout > 0 in training
  uint8_t* fc2_mask;   // (B, T, D) when dropout > 0 in training
  float* path_scale_att;  // (B) drop path's factor of each image's attention branch, 0 or
                          // 1 / (1 - p), when drop_path > 0 in training
  float* path_scale_mlp;  // (B) the same for the MLP branch
  float* att_grad;   // (B, H, T, T) gradient at att, kept by backward when the activations
                     // were built to explain a prediction (ActivationsFor::explanation)
  // The block's linear weights transposed, which forward's products read as they lie
  // (vit.h, forward weights).
  float* qkv_w_t;    // (D, 3D)
  float* proj_w_t;   // (D, D)
  float* fc1_w_t;    // (D, M)
  float* fc2_w_t;    // (M, D)
};

// One convolution of the conv stem (model.patch_embed = "conv"), stage s of
// ModelConfig::stem_stages(): R = stem_side(s)^2 output positions an image, I = 9
// stem_in(s) inputs each, O = stem_out(s) channels. Rows are positions in row-major order,
// channels last, which is how the next stage and the projection read them.
struct StemActivations {
  float* cols;   // (B, R, I) each position's 3x3 window of the stage's input (conv_stem.h)
  float* pre;    // (B, R, O) the convolution, bias added, before GELU; after a training
                 // forward, GELU's slope there
  float* out;    // (B, R, O) GELU(pre); the last stage writes Activations::patches instead
  float* dout;   // (B, R, O) gradient at out (training; the last stage's is dpatches)
  float* dpre;   // (B, R, O) gradient at pre (training)
  float* dcols;  // (B, R, I) gradient at cols (training, stages after the first: the
                 // image's pixels take no gradient)
  float* weight_t;  // (I, O) the stage's weight transposed, as forward reads it
  uint8_t* read;    // (B, R) 1 at the positions the next stage's windows read, a stage
                    // before the last in a training forward with patch dropout
};

// Where a step's time goes, for the benchmark. Counted while an Activations points at one:
// the attention core (q k^T, softmax, dropout, P v and their backward) inside the passes,
// and train_step's phases, which together make up the step.
struct StepProfile {
  double attention_seconds = 0.0;
  double clear_seconds = 0.0;     // zeroing the gradients (one thread)
  double forward_seconds = 0.0;   // forward and loss
  double backward_seconds = 0.0;  // loss gradient and backward
  double update_seconds = 0.0;    // clipping, optimizer step, weights' average (one thread)
};

// The gradient scratch a block's backward writes for its weight gradients to read (training
// only). Activations hold two sets, block l using set l % 2, so that the rows of one block
// (vit_backward.cpp) run in the same parallel region as the weight gradients of the block
// after it, which read the other set.
struct BlockGradScratch {
  float* dresid_mid;  // (B, T, D) gradient of the residual stream at x_mid
  float* dbranch;     // (B, T, D) gradient of the MLP branch's output before its dropout
                      // and drop path (with either)
  float* dbranch_att; // (B, T, D) the same for the attention branch
  float* dln;         // (B, T, D) gradient of LN2's output
  float* dln1;        // (B, T, D) gradient of LN1's output
  float* dqkv;        // (B, T, 3D)
  float* dfc1;        // (B, T, M); first the gradient at fc2's input where GELU's backward
                      // is a pass of its own, which then sets it in place
  float* score_grad_pairs;  // (B, H, Dh) the score parameters' gradient per (batch, head),
                            // additive and cosine forms
};

struct Activations {
  // What the buffers were sized for; vit_forward and vit_backward check their callers
  // against it.
  ModelConfig config;
  int max_batch = 0;
  ActivationsFor use = ActivationsFor::evaluation;
  bool has_backward() const { return runs_backward(use); }
  // Every block's activation buffers are block 0's (all but the weight transposes).
  bool blocks_share() const { return use == ActivationsFor::evaluation; }

  std::vector<StemActivations> stem;  // (model.stem_stages())
  float* patches;     // (B, N, C'*P'*P') what the projection reads: each patch's pixels, or
                      // the conv stem's last output (ModelConfig::patch_len)
  float* patch_proj;  // (B, N, D)
  float* patch_w_t;   // (C'*P'*P', D) the projection's weight transposed, as forward reads it
  // With patch dropout in training (model.patch_drop, nn/patch_drop.h) the embedding writes
  // the kept tokens alone into blocks[0].x: there, and in every (B, T, ...) buffer after it,
  // T is then ModelConfig::train_tokens().
  uint8_t* patch_keep;  // (B, N) 1 for the patches an image keeps
  float* patch_draws;   // (B, N) scratch of the draw that picks them
  // A training step with patch dropout runs the projection on the kept patches alone, and
  // behind a conv stem the stem's last stage too, K = ModelConfig::kept_patches() of each
  // image's N (vit_forward.cpp), with I the last stage's window length; patch_proj is then
  // not written, and behind a stem `patches` and the buffers in `stem` hold zero rows at the
  // dropped patches.
  float* kept_cols = nullptr;         // (B, K, I) the last stage's windows at kept patches
  float* kept_pre = nullptr;          // (B, K, C') GELU's slope there
  float* kept_patches = nullptr;      // (B, K, C'*P'*P') the projection's input there
  float* kept_patch_proj = nullptr;   // (B, K, D) their projection
  float* dkept_patch_proj = nullptr;  // (B, K, D) backward: gradient at kept_patch_proj
  float* dkept_patches = nullptr;     // (B, K, C') at kept_patches
  float* dkept_pre = nullptr;         // (B, K, C') at the last stage's pre-activation
  float* dkept_cols = nullptr;        // (B, K, I) at kept_cols (stems of two stages or more)
  std::vector<BlockActivations> blocks;  // (L)
  float* x_final;     // (B, T, D) the residual stream after the last block
  float* branch;      // (B, T, D) forward scratch: a branch output before the residual add
  float* pooled;      // (B, D) what the head reads of the last residual stream: the CLS
                      // row, or the mean of the tokens (model.pool = mean)
  float* pooled_norm; // (B, D) after the final LayerNorm; with model.pool = seq, the
                      // weighted sum of token_norm (pooled is then unused)
  float* pooled_mean; // (B)
  float* pooled_rstd; // (B)
  // model.pool = seq only (nn/seq_pool.h): the final LayerNorm runs on every token.
  float* token_norm = nullptr;    // (B, T, D)
  float* token_mean = nullptr;    // (B, T)
  float* token_rstd = nullptr;    // (B, T)
  float* pool_weights = nullptr;  // (B, T) each token's share of the pooled row
  float* logits;      // (B, K)
  float* probs;       // (B, K) softmax, cached by the loss
  // Gradient scratch, reused by every block on the way back (training only).
  float* dlogits;     // (B, K)
  float* dpooled_norm; // (B, D)
  float* dpooled;     // (B, D)
  float* dtoken_norm = nullptr;       // (B, T, D) model.pool = seq
  float* pool_score_grads = nullptr;  // (B, T) model.pool = seq: scratch of its backward
  // The gradient of the residual stream at the blocks' boundaries, three buffers in turn:
  // block l reads the one at its output and writes the one at its input while the weight
  // gradients of block l + 1 still read the one at block l + 1's output.
  float* dresid_0;    // (B, T, D)
  float* dresid_1;    // (B, T, D)
  float* dresid_2;    // (B, T, D)
  float* dresid(int i) const { return i == 0 ? dresid_0 : i == 1 ? dresid_1 : dresid_2; }
  std::array<BlockGradScratch, 2> block_grads;
  float* datt_out;    // (B, T, D) gradient at the attention core's output
  float* dgelu;       // (B, T, M) gradient of GELU's output before its dropout
  float* dpatch_proj; // (B, N, D)
  float* dpatches;    // (B, N, C') gradient at the conv stem's output (training with one)
  // The layers' own scratch.
  float* layernorm_partials;  // (2, ...) LayerNorm backward's per-slice weight-gradient sums,
                              // one half for each of a block's two LayerNorms
  float* attention_scratch;   // (slots, per-thread size) the attention core's per-thread rows
  int attention_slots = 0;    // threads the attention core may use at once

  StepProfile* profile = nullptr;  // timings are added here when set

  // How the passes on these activations compute: the instruction-set level of the layers,
  // the product kernels, the threads (kernels/compute.h). The fastest the CPU runs unless
  // set otherwise.
  Compute compute = Compute::automatic();
  // How training passes compute the transformer blocks' matrix products (train.precision,
  // kernels/gemm.h); evaluation passes, and the patch embedding and head, stay fp32. A bf16
  // request that compute's kernels cannot honour runs in fp32.
  Precision block_products = Precision::fp32;
  Products products(bool training) const {
    return {compute.kernels,
            training ? compute.effective_precision(block_products) : Precision::fp32};
  }

  // Whether forwards multiply by the *_w_t transposes; where the kernels do not read them
  // (nn/linear.h), none are made.
  bool reads_weight_transposes() const { return reads_weight_columns(compute.kernels); }
  // A linear weight's transpose as the forward's products read it, or null under OpenBLAS.
  const float* weight_columns(const float* transposed) const {
    return reads_weight_transposes() ? transposed : nullptr;
  }

  // The model weights (ViT::weights.data()) whose transposes the *_w_t buffers hold until
  // release_forward_weights, or null while each forward makes them anew (vit.h).
  const float* forward_weights_held = nullptr;

  // Set by vit_forward, read by vit_backward: the batch and mode of the last forward.
  int forward_batch = 0;
  bool forward_was_training = false;

  // ActivationsFor::explanation adds att_grad to every block: the gradient of whatever
  // dlogits seeds with respect to each softmax output.
  Activations(const ModelConfig& config, int max_batch, ActivationsFor use);
  Activations(const Activations&) = delete;
  Activations& operator=(const Activations&) = delete;

  int64_t bytes() const;  // of both flat buffers

 private:
  Tensor1 floats_;  // every float buffer above
  Mask1 masks_;     // every uint8_t buffer above
};

// The buffers Activations(config, batch, use) allocates, by name in table order, a
// block buffer's bytes summed over the blocks; in double so that absurd sizes cannot
// overflow. For the memory guard and for people asking where the memory goes.
struct ActivationBuffer {
  std::string name;
  double bytes = 0;
};
std::vector<ActivationBuffer> activation_buffers(const ModelConfig& config, int batch,
                                                 ActivationsFor use);

// Their total, with the alignment slack: exactly Activations::bytes().
double activation_bytes(const ModelConfig& config, int batch, ActivationsFor use);

}  // namespace minivit
