#pragma once
// LayerNorm over the last dimension D, eps 1e-6 (timm's ViT).
//   out = (inp - mean) * rstd * weight + bias
// Forward caches mean and rstd per row for backward. Backward adds into dinp, dweight, dbias.
#include <cstdint>
#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN

constexpr float kLayerNormEps = 1e-6f;

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int R, int D);

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int R, int D, float* partials);

// The same backward in two halves, for a caller that takes the rows in chunks and the
// weight gradients, which sum over every row, afterwards (vit.cpp); together they compute
// exactly what layernorm_backward does.
// With dinp_base given, dinp = dinp_base + the gradient (a residual stream's gradient
// carried past the LayerNorm in the same pass) instead of dinp += the gradient.
void layernorm_backward_input(float* dinp, const float* dout, const float* inp,
                              const float* weight, const float* mean, const float* rstd, int R,
                              int D, const float* dinp_base = nullptr);
void layernorm_backward_params(float* dweight, float* dbias, const float* dout, const float* inp,
                               const float* mean, const float* rstd, int R, int D,
                               float* partials);

// Floats of scratch layernorm_backward needs in `partials`: the per-slice sums of the
// weight gradients (see layernorm.cpp).
int64_t layernorm_partials_floats(int D);

MINIVIT_ISA_END
}  // namespace minivit
