#include "minivit/gelu.h"

#include <cmath>

#include "minivit/fastmath.h"

namespace minivit {

static constexpr float kInvSqrt2 = 0.70710678118654752f;
static constexpr float kInvSqrt2Pi = 0.39894228040143268f;

void gelu_forward(float* out, const float* inp, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + fast_erf(x * kInvSqrt2));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float cdf = 0.5f * (1.0f + fast_erf(x * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * fast_exp(-0.5f * x * x);
    dinp[i] += dout[i] * (cdf + x * pdf);
  }
}

}  // namespace minivit
