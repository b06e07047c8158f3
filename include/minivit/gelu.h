#pragma once
// GELU, exact form with erf (PyTorch's default, timm's ViT):
//   gelu(x) = 0.5 x (1 + erf(x / sqrt 2))
#include <cstdint>

namespace minivit {

void gelu_forward(float* out, const float* inp, int64_t n);

// dinp += dout * gelu'(inp)
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n);

}  // namespace minivit
