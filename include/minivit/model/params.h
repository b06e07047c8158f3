#pragma once
// The model's parameters: one flat buffer described by one table. Each row of the table
// names a tensor as timm's VisionTransformer.state_dict() does, gives its shape, how it is
// initialised, whether weight decay applies, and which field of ViTParams points at it.
// Allocation, binding, the parameter count, initialisation, the optimizer and checkpoints
// all walk this table, so adding a tensor is one row.
#include <cstdint>
#include <string>
#include <vector>

#include "minivit/core/config.h"
#include "minivit/core/tensor.h"

namespace minivit {

// Pointers to each tensor of one block inside a flat buffer (weights, or gradients: the
// same layout).
struct BlockParams {
  float* norm1_w;  // (D)
  float* norm1_b;  // (D)
  float* qkv_w;    // (3D, D)
  float* qkv_b;    // (3D)
  float* additive_v;   // (H, Dh) model.attention = "additive" only, else null
  float* logit_scale;  // (H, 1, 1) model.attention = "cosine" or "lsa" only, else null
  float* proj_w;   // (D, D)
  float* proj_b;   // (D)
  float* norm2_w;  // (D)
  float* norm2_b;  // (D)
  float* fc1_w;    // (M, D)
  float* fc1_b;    // (M)
  float* fc2_w;    // (D, M)
  float* fc2_b;    // (D)
};

// One convolution of the conv stem (model.patch_embed = "conv").
struct StemParams {
  float* weight;  // (C_out, C_in, 3, 3), ModelConfig::stem_out / stem_in
  float* bias;    // (C_out)
};

// A tensor the model's form leaves out (see ModelConfig) stays nullptr.
struct ViTParams {
  std::vector<StemParams> stem;  // (ModelConfig::stem_stages()), empty without a conv stem
  float* cls_token = nullptr;  // (1, 1, D) when model.pool = cls
  float* pos_embed = nullptr;  // (1, T, D) unless model.pos_embed = none
  float* patch_w = nullptr;    // (D, C', P', P'), C' = ModelConfig::patch_channels(),
                               // P' = patch_kernel()
  float* patch_b = nullptr;    // (D)
  std::vector<BlockParams> blocks;  // (L)
  float* norm_w = nullptr;  // (D) the final LayerNorm: `norm`, or `fc_norm` (mean pool)
  float* norm_b = nullptr;  // (D)
  float* pool_w = nullptr;  // (1, D) model.pool = seq: the token scores' projection
  float* head_w = nullptr;  // (K, D)
  float* head_b = nullptr;  // (K)
};

// timm's initialisation, by kind of tensor; `init_scale` in the table is the normal's std or
// the uniform's bound.
enum class ParamInit {
  zeros,         // biases, LayerNorm shifts
  ones,          // LayerNorm scales
  trunc_normal,  // linear weights and the position embedding: N(0, 0.02^2) cut at +-2 std
  normal,        // the CLS token: N(0, 1e-6^2)
  uniform,       // the patch projection and the stem's convolutions, left at Conv2d's
                 // default: U(+-1/sqrt(fan_in)), fan_in = C*P*P or C_in*3*3
  constant,      // every entry init_scale: the cosine form's log-temperature, ln 10
  sincos_2d,     // the fixed position table of model.pos_embed = sincos2d (sincos_2d_table)
};

struct ParamSpec {
  std::string name;            // timm state_dict name
  std::vector<int64_t> shape;  // timm shape
  int64_t offset = 0;          // into the flat buffer
  int64_t size = 0;
  ParamInit init = ParamInit::zeros;
  double init_scale = 0.0;
  bool decay = false;  // weight decay applies (matrices only: not biases, norms, cls, pos)
  // False for values fixed at initialisation (the sin-cos position table): the optimizer
  // never moves them, and their gradient and moments stay zero.
  bool trainable = true;
  int sincos_grid = 0;  // ParamInit::sincos_2d: the side G of the patch grid
  // Where the tensor is bound: a field of ViTParams, of ViTParams::blocks[block], or of
  // ViTParams::stem[stage].
  int block = -1;                                  // -1: not in a block
  int stage = -1;                                  // -1: not in the stem
  float* ViTParams::*model_field = nullptr;        // when block < 0 and stage < 0
  float* BlockParams::*block_field = nullptr;      // when block >= 0
  float* StemParams::*stage_field = nullptr;       // when stage >= 0
};

// The table, in the order of timm's state_dict (the order of the flat buffer).
std::vector<ParamSpec> vit_param_specs(const ModelConfig& config);

// The number of parameters the table lays out, summed in double so that absurd sizes (from
// a corrupt file, say) cannot overflow.
double vit_param_count(const ModelConfig& config);

// Points every field of a ViTParams at its tensor inside `base` (num_params floats).
ViTParams bind_params(float* base, const std::vector<ParamSpec>& specs, int depth);

// SimpleViT's posemb_sincos_2d (temperature 10000) as `rows` x D floats: the first
// rows - G*G rows zero (a CLS token's), then patch (y, x) of the G x G grid in row-major order
// as [sin(x w), cos(x w), sin(y w), cos(y w)], each block D/4 long, w_k = 10000^(-k/(D/4 - 1))
// for k < D/4. D must be a multiple of 4. Computed in double, rounded once to float.
void sincos_2d_table(float* out, int64_t rows, int64_t D, int G);

// Fills `weights` (the flat buffer) by each tensor's ParamInit; the draws of tensor t come
// from rng_key(seed, kRngInit, t), so a tensor's values do not depend on the others.
void init_params(float* weights, const std::vector<ParamSpec>& specs, uint64_t seed);

}  // namespace minivit
