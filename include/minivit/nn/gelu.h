#pragma once
// GELU, exact form with erf (PyTorch's default, timm's ViT):
//   gelu(x) = 0.5 x (1 + erf(x / sqrt 2))
#include <cstdint>
#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN

// GELU with the bias of the linear layer before it fused into the same pass:
//   pre (R, M) += bias (M) on every row;  out = gelu(pre)
// pre keeps the biased value, which is what gelu_backward needs.
void bias_gelu_forward(float* out, float* pre, const float* bias, int64_t R, int M);

// dinp += dout * gelu'(inp); with add_into false dinp is set instead, sparing the pass that
// would clear it first (the same bits: the product plus zero).
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n,
                   bool add_into = true);

MINIVIT_ISA_END
}  // namespace minivit
