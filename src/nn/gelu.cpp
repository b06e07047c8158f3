#include "minivit/nn/gelu.h"

#include <algorithm>

#include "minivit/kernels/threads.h"
#include "minivit/kernels/vecmath.h"

namespace minivit {
MINIVIT_ISA_BEGIN

// gelu_inline and gelu_slope_inline (vecmath.h) run in whole vectors here. simdlen(16):
// GCC's tuning for AVX-512 CPUs prefers 8-lane vectors, but these loops are arithmetic-bound
// (a division and two polynomials per element, in L2), and 16 lanes ran them at 1.3-1.7x the
// rate; each lane's arithmetic is the same, so the bits are too.

void bias_gelu_forward(float* out, float* pre, const float* bias, int64_t R, int M,
                       bool slope_in_pre, const uint8_t* rows_used) {
  for_ranges(R, R * M > 65536, [&](int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    float* h = pre + r * M;
    float* y = out + r * M;
    if (rows_used && !rows_used[r]) {
      std::fill_n(h, M, 0.0f);
      std::fill_n(y, M, 0.0f);
      continue;
    }
    if (slope_in_pre) {
#pragma omp simd simdlen(16)
      for (int m = 0; m < M; ++m) h[m] += bias[m];
      gelu_and_slope(y, h, M);
    } else {
#pragma omp simd simdlen(16)
      for (int m = 0; m < M; ++m) {
        const float x = h[m] + bias[m];
        h[m] = x;
        y[m] = gelu_inline(x);
      }
    }
  }
  });
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n,
                   bool add_into) {
  // Pieces of whole vectors: the compiler's remainder loop may round an element apart from
  // the vector body, so a cut by thread count inside a vector would move the rounding.
  constexpr int64_t kLanes = 16;
  for_ranges((n + kLanes - 1) / kLanes, n > 65536, [&](int64_t v0, int64_t v1) {
  const int64_t begin = v0 * kLanes, end = std::min(n, v1 * kLanes);
  if (add_into) {
#pragma omp simd simdlen(16)
    for (int64_t i = begin; i < end; ++i) dinp[i] += dout[i] * gelu_slope_inline(inp[i]);
  } else {
#pragma omp simd simdlen(16)
    for (int64_t i = begin; i < end; ++i) dinp[i] = 0.0f + dout[i] * gelu_slope_inline(inp[i]);
  }
  });
}

void gelu_backward_slope(float* dinp, const float* slope, const float* dout, int64_t n) {
  // Pieces of whole vectors, as in gelu_backward.
  constexpr int64_t kLanes = 16;
  for_ranges((n + kLanes - 1) / kLanes, n > 65536, [&](int64_t v0, int64_t v1) {
    const int64_t begin = v0 * kLanes, end = std::min(n, v1 * kLanes);
#pragma omp simd simdlen(16)
    for (int64_t i = begin; i < end; ++i) dinp[i] = 0.0f + dout[i] * slope[i];
  });
}

MINIVIT_ISA_END
}  // namespace minivit
