#include "minivit/nn/seq_pool.h"

#include <cmath>
#include <cstdint>

#include "minivit/kernels/threads.h"

namespace minivit {
MINIVIT_ISA_BEGIN

static float dot_row(const float* a, const float* b, int D) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int d = 0; d < D; ++d) sum += a[d] * b[d];
  return sum;
}

void seq_pool_forward(float* pooled, float* weights, const float* x, const float* w, int B,
                      int T, int D) {
  for_ranges(B, B >= 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const float* rows = x + b * T * D;
      float* a = weights + b * T;
      float top = -INFINITY;
      for (int t = 0; t < T; ++t) {
        a[t] = dot_row(rows + int64_t(t) * D, w, D);
        top = std::fmax(top, a[t]);
      }
      float total = 0.0f;
      for (int t = 0; t < T; ++t) {
        a[t] = std::exp(a[t] - top);
        total += a[t];
      }
      const float inv = 1.0f / total;
      for (int t = 0; t < T; ++t) a[t] *= inv;
      float* out = pooled + b * D;
      for (int d = 0; d < D; ++d) out[d] = 0.0f;
      for (int t = 0; t < T; ++t) {
        const float* row = rows + int64_t(t) * D;
        const float at = a[t];
#pragma omp simd
        for (int d = 0; d < D; ++d) out[d] += at * row[d];
      }
    }
  });
}

void seq_pool_backward(float* dx, float* dw, const float* dpooled,
                       const float* weights, const float* x, const float* w, int B, int T,
                       int D, float* score_grads) {
  // Per image: dweight_t = dpooled . x_t; the softmax's backward gives the score gradient
  // ds_t = weight_t (dweight_t - sum_u weight_u dweight_u); x_t gets weight_t dpooled from
  // the sum and ds_t w from its score.
  for_ranges(B, B >= 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const float* rows = x + b * T * D;
      const float* a = weights + b * T;
      const float* g = dpooled + b * D;
      float* ds = score_grads + b * T;
      float mean_dweight = 0.0f;
      for (int t = 0; t < T; ++t) {
        ds[t] = dot_row(g, rows + int64_t(t) * D, D);
        mean_dweight += a[t] * ds[t];
      }
      for (int t = 0; t < T; ++t) {
        ds[t] = a[t] * (ds[t] - mean_dweight);
        float* drow = dx + (b * T + t) * D;
        const float at = a[t], dst = ds[t];
#pragma omp simd
        for (int d = 0; d < D; ++d) drow[d] += at * g[d] + dst * w[d];
      }
    }
  });
  // The weights' gradient, summed over (b, t) in order on one thread: B T D multiply-adds,
  // small beside the blocks.
  for (int64_t bt = 0; bt < int64_t(B) * T; ++bt) {
    const float dst = score_grads[bt];
    const float* row = x + bt * D;
#pragma omp simd
    for (int d = 0; d < D; ++d) dw[d] += dst * row[d];
  }
}

MINIVIT_ISA_END
}  // namespace minivit
