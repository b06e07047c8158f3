#include "minivit/nn/mean_pool.h"

#include <cstdint>

#include "minivit/kernels/threads.h"

namespace minivit {
MINIVIT_ISA_BEGIN

void mean_pool_forward(float* pooled, const float* x, int B, int T, int D) {
  const float count = float(T);
  for_ranges(B, B >= 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      float* out = pooled + int64_t(b) * D;
      const float* rows = x + int64_t(b) * T * D;
      for (int d = 0; d < D; ++d) out[d] = 0.0f;
      for (int t = 0; t < T; ++t) {
        const float* row = rows + int64_t(t) * D;
#pragma omp simd
        for (int d = 0; d < D; ++d) out[d] += row[d];
      }
      for (int d = 0; d < D; ++d) out[d] /= count;
    }
  });
}

void mean_pool_backward(float* dx, const float* dpooled, int B, int T, int D, bool add_into) {
  const float count = float(T);
  for_ranges(B, B >= 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const float* dout = dpooled + int64_t(b) * D;
      float* rows = dx + int64_t(b) * T * D;
      for (int t = 0; t < T; ++t) {
        float* row = rows + int64_t(t) * D;
        if (add_into) {
#pragma omp simd
          for (int d = 0; d < D; ++d) row[d] += dout[d] / count;
        } else {
#pragma omp simd
          for (int d = 0; d < D; ++d) row[d] = 0.0f + dout[d] / count;
        }
      }
    }
  });
}

MINIVIT_ISA_END
}  // namespace minivit
