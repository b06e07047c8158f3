#include "minivit/gelu.h"

#include <cmath>

#include "minivit/vecmath.h"

namespace minivit {

static constexpr float kInvSqrt2 = 0.70710678118654752f;
static constexpr float kInvSqrt2Pi = 0.39894228040143268f;

// Phi(x) = 0.5 (1 + erf(x / sqrt 2)) = 0.5 erfc(-x / sqrt 2): the erfc form keeps full
// relative precision in the negative tail, where 1 + erf cancels.

void gelu_forward(float* out, const float* inp, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i];
    out[i] = 0.5f * x * erfcf(-x * kInvSqrt2);
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float cdf = 0.5f * erfcf(-x * kInvSqrt2);
    const float pdf = kInvSqrt2Pi * expf(-0.5f * x * x);
    dinp[i] += dout[i] * (cdf + x * pdf);
  }
}

}  // namespace minivit
