#pragma once
// The Vision Transformer (timm's VisionTransformer, global_pool='token'), forward and
// backward by hand. Reading this header top to bottom is reading the model:
//   ParamSpec / ViTParams   the weights: one flat buffer described by a table, timm's
//                           names and shapes, so checkpoints and optimizers are one loop
//   Activations             the run state: buffers for one wave of activations, sized once
//                           for the largest batch and reused, so a step allocates nothing
//   vit_forward/backward    the model, one layer call per line
#include <cstdint>
#include <string>
#include <vector>

#include "minivit/core/config.h"
#include "minivit/core/tensor.h"

namespace minivit {

struct ParamSpec {
  std::string name;            // timm state_dict name
  std::vector<int64_t> shape;  // timm shape
  int64_t offset = 0;          // into the flat buffer
  int64_t size = 0;
  bool decay = false;  // weight decay applies (matrices only: not biases, norms, cls, pos)
};

std::vector<ParamSpec> vit_param_specs(const ModelConfig& config);

// Pointers to each tensor inside one flat buffer (weights, or gradients: same layout).
struct BlockParams {
  float* norm1_w;  // (D)
  float* norm1_b;  // (D)
  float* qkv_w;    // (3D, D)
  float* qkv_b;    // (3D)
  float* proj_w;   // (D, D)
  float* proj_b;   // (D)
  float* norm2_w;  // (D)
  float* norm2_b;  // (D)
  float* fc1_w;    // (M, D)
  float* fc1_b;    // (M)
  float* fc2_w;    // (D, M)
  float* fc2_b;    // (D)
};

struct ViTParams {
  float* cls_token;  // (1, 1, D)
  float* pos_embed;  // (1, T, D)
  float* patch_w;    // (D, C, P, P)
  float* patch_b;    // (D)
  std::vector<BlockParams> blocks;  // (L)
  float* norm_w;  // (D)
  float* norm_b;  // (D)
  float* head_w;  // (K, D)
  float* head_b;  // (K)
};

// The number of parameters vit_param_specs lays out, in double so that absurd sizes (from a
// corrupt file, say) cannot overflow.
double vit_param_count(const ModelConfig& config);

// Bytes a model needs, in double so that absurd sizes cannot overflow: its parameters
// (weights and gradients, and the optimizer's two moments when `training`) plus, for a
// batch of `batch` images, the activations forward keeps (and backward's buffers).
double vit_memory_bytes(const ModelConfig& config, int batch, bool training);

// Throws minivit::Error naming the model's sizes when vit_memory_bytes exceeds the
// machine's physical memory, before anything is allocated.
void check_vit_fits_memory(const ModelConfig& config, int batch, bool training);

struct ViT {
  ModelConfig config;
  std::vector<ParamSpec> specs;
  int64_t num_params = 0;
  Tensor1 weights;  // (num_params)
  Tensor1 grads;    // (num_params)
  ViTParams w;      // views into weights
  ViTParams g;      // views into grads

  explicit ViT(const ModelConfig& config);
  ViT(const ViT&) = delete;
  ViT& operator=(const ViT&) = delete;

  // timm's initialisation: trunc-normal(0.02) for linear weights and the position
  // embedding, zero biases, LayerNorm (1, 0), normal(1e-6) for the CLS token, and PyTorch's
  // Conv2d default (uniform +-1/sqrt(C*P*P)) for the patch projection.
  void init(uint64_t seed);
  void zero_grad();
  const ParamSpec* find(const std::string& name) const;
};

struct BlockActivations {
  Tensor3 ln1;         // (B, T, D)
  Tensor2 ln1_mean;    // (B, T)
  Tensor2 ln1_rstd;    // (B, T)
  Tensor3 qkv;         // (B, T, 3D)
  Tensor4 att;         // (B, H, T, T) softmax weights, before dropout
  Mask1 att_mask;      // (B*H*T*T) when attention_dropout > 0
  Tensor3 att_out;     // (B, T, D) heads concatenated, input of proj
  Mask1 proj_mask;     // (B*T*D) when dropout > 0
  Tensor3 resid_mid;   // (B, T, D) residual stream between attention and MLP
  Tensor3 ln2;         // (B, T, D)
  Tensor2 ln2_mean;    // (B, T)
  Tensor2 ln2_rstd;    // (B, T)
  Tensor3 fc1;         // (B, T, M) before GELU
  Tensor3 fc2_in;      // (B, T, M) dropout(GELU(fc1))
  Mask1 gelu_mask;     // (B*T*M) when dropout > 0
  Mask1 fc2_mask;      // (B*T*D) when dropout > 0
};

struct Activations {
  int max_batch = 0;
  Tensor3 patches;     // (B, N, C*P*P)
  Tensor3 patch_proj;  // (B, N, D)
  std::vector<Tensor3> resid;  // (L+1) x (B, T, D): input of block l is resid[l]
  std::vector<BlockActivations> blocks;  // (L)
  Tensor2 cls;        // (B, D) CLS row of the last residual stream
  Tensor2 cls_norm;   // (B, D) after the final LayerNorm
  Tensor1 cls_mean;   // (B)
  Tensor1 cls_rstd;   // (B)
  Tensor2 logits;     // (B, K)
  Tensor2 probs;      // (B, K) softmax, cached by the loss
  // Gradient scratch, reused by every block on the way back.
  Tensor2 dlogits;    // (B, K)
  Tensor2 dcls_norm;  // (B, D)
  Tensor2 dcls;       // (B, D)
  Tensor3 dresid;     // (B, T, D) gradient of the residual stream, updated in place
  Tensor3 dbranch;    // (B, T, D) gradient of a branch output (before its dropout)
  Tensor3 dln;        // (B, T, D) gradient of a LayerNorm output
  Tensor3 datt_out;   // (B, T, D)
  Tensor3 dqkv;       // (B, T, 3D)
  Tensor3 dfc2_in;    // (B, T, M)
  Tensor3 dgelu;      // (B, T, M)
  Tensor3 dfc1;       // (B, T, M)
  Tensor3 dpatch_proj;  // (B, N, D)
  Tensor3 branch;     // (B, T, D) forward scratch: a branch output before the residual add

  Activations(const ModelConfig& config, int max_batch, bool for_training);
  int64_t bytes() const;
};

// Where a step's time goes, for the benchmark: seconds spent in the attention core
// (q k^T, softmax, dropout, P v and their backward) out of the whole forward/backward.
// Accumulated only while `enabled`.
struct StepProfile {
  bool enabled = false;
  double attention_seconds = 0.0;
};
extern StepProfile g_step_profile;

// images (B, C, S, S), normalised. Leaves logits in acts.logits. `dropout_key` seeds the
// dropout masks of this step (ignored when !training).
void vit_forward(const ViT& model, Activations& acts, const float* images, int B, bool training,
                 uint64_t dropout_key);

// From acts.dlogits (B, K) back to every parameter; adds into model.grads.
void vit_backward(ViT& model, Activations& acts, int B);

// Floating-point operations of one forward pass for one image (multiply-add = 2): the
// matrix products and attention, which are all but a sliver of the work.
double vit_forward_flops(const ModelConfig& config);

// Forward plus backward for one image: backward costs two products per forward product
// (input and weight gradients), less the input gradient of the patch projection, which is
// never needed.
double vit_train_flops(const ModelConfig& config);

// The attention core's share of the forward FLOPs (q k^T and P v against everything).
double vit_attention_flop_share(const ModelConfig& config);

}  // namespace minivit
