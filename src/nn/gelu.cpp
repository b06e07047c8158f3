#include "minivit/nn/gelu.h"

#include <algorithm>

#include "minivit/kernels/threads.h"
#include "minivit/kernels/vecmath.h"

namespace minivit {
MINIVIT_ISA_BEGIN

static constexpr float kInvSqrt2 = 0.70710678118654752f;
static constexpr float kInvSqrt2Pi = 0.39894228040143268f;

// Phi(x) = 0.5 (1 + erf(x / sqrt 2)) = 0.5 erfc(-x / sqrt 2): the erfc form keeps full
// relative precision in the negative tail, where 1 + erf cancels. erfc and exp are the
// inlined ones of vecmath.h, so the loops below run in whole vectors. simdlen(16): GCC's
// tuning for AVX-512 CPUs prefers 8-lane vectors, but these loops are arithmetic-bound (a
// division and two polynomials per element, in L2), and 16 lanes ran them at 1.3-1.7x the
// rate; each lane's arithmetic is the same, so the bits are too.

void bias_gelu_forward(float* out, float* pre, const float* bias, int64_t R, int M) {
  for_ranges(R, R * M > 65536, [&](int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    float* h = pre + r * M;
    float* y = out + r * M;
#pragma omp simd simdlen(16)
    for (int m = 0; m < M; ++m) {
      const float x = h[m] + bias[m];
      h[m] = x;
      y[m] = 0.5f * x * erfc_inline(-x * kInvSqrt2);
    }
  }
  });
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
  // Pieces of whole vectors: the compiler's remainder loop may round an element apart from
  // the vector body, so a cut by thread count inside a vector would move the rounding.
  constexpr int64_t kLanes = 16;
  for_ranges((n + kLanes - 1) / kLanes, n > 65536, [&](int64_t v0, int64_t v1) {
  const int64_t begin = v0 * kLanes, end = std::min(n, v1 * kLanes);
#pragma omp simd simdlen(16)
  for (int64_t i = begin; i < end; ++i) {
    const float x = inp[i];
    const float cdf = 0.5f * erfc_inline(-x * kInvSqrt2);
    const float pdf = kInvSqrt2Pi * exp_nonpositive(-0.5f * x * x);
    dinp[i] += dout[i] * (cdf + x * pdf);
  }
  });
}

MINIVIT_ISA_END
}  // namespace minivit
