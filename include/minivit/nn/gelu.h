#pragma once
// GELU, exact form with erf (PyTorch's default, timm's ViT):
//   gelu(x) = 0.5 x (1 + erf(x / sqrt 2))
#include <cstdint>
#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN

// GELU with the bias of the linear layer before it fused into the same pass:
//   pre (R, M) += bias (M) on every row;  out = gelu(pre)
// pre keeps the biased value, which is what gelu_backward needs; with slope_in_pre (a
// training forward) it keeps gelu'(pre) instead, which is what gelu_backward_slope needs:
// the slope shares the forward's erfc, and backward then only multiplies. With rows_used (R),
// a row marked 0 is set to zero in both out and pre instead: a row that nothing reads
// (conv_stem.cpp), whose zero slope then gives it a zero gradient.
void bias_gelu_forward(float* out, float* pre, const float* bias, int64_t R, int M,
                       bool slope_in_pre = false, const uint8_t* rows_used = nullptr);

// dinp += dout * gelu'(inp); with add_into false dinp is set instead, sparing the pass that
// would clear it first (the same bits: the product plus zero), and may be dout itself.
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n,
                   bool add_into = true);

// dinp = dout * slope, slope being gelu'(inp) as a forward with slope_in_pre left it: the
// same bits as gelu_backward(dinp, inp, dout, n, false).
void gelu_backward_slope(float* dinp, const float* slope, const float* dout, int64_t n);

MINIVIT_ISA_END
}  // namespace minivit
