#include "minivit/layernorm.h"

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace minivit {

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int R, int D) {
#pragma omp parallel for schedule(static) if (int64_t(R) * D > 32768)
  for (int r = 0; r < R; ++r) {
    const float* x = inp + int64_t(r) * D;
    // Two passes over a row that sits in L1: exact variance without cancellation.
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < D; ++i) sum += x[i];
    const float m = sum / D;
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (int i = 0; i < D; ++i) {
      const float d = x[i] - m;
      var += d * d;
    }
    const float s = 1.0f / std::sqrt(var / D + kLayerNormEps);
    float* y = out + int64_t(r) * D;
    for (int i = 0; i < D; ++i) y[i] = (x[i] - m) * s * weight[i] + bias[i];
    mean[r] = m;  // cache the mean and rstd for the backward pass
    rstd[r] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int R, int D) {
  // Each thread sums its own rows' weight gradients into a private slice; the slices are
  // added in thread order afterwards, so results are reproducible for a given thread count.
  const int threads = (int64_t(R) * D > 32768) ? omp_get_max_threads() : 1;
  // Shared by the team (not thread_local): the calling thread sizes it, workers fill
  // their slices. Kept between calls so a training step does not allocate.
  static std::vector<float> partial;
  partial.assign(size_t(threads) * 2 * D, 0.0f);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    float* dw = partial.data() + size_t(t) * 2 * D;
    float* db = dw + D;
#pragma omp for schedule(static)
    for (int r = 0; r < R; ++r) {
      const float* x = inp + int64_t(r) * D;
      const float* dy = dout + int64_t(r) * D;
      float* dx = dinp + int64_t(r) * D;
      const float m = mean[r], s = rstd[r];
      // xhat = (x - m) * s;  dxhat = dy * weight
      float mean_dxhat = 0.0f, mean_dxhat_xhat = 0.0f;
#pragma omp simd reduction(+ : mean_dxhat, mean_dxhat_xhat)
      for (int i = 0; i < D; ++i) {
        const float xhat = (x[i] - m) * s;
        const float dxhat = dy[i] * weight[i];
        mean_dxhat += dxhat;
        mean_dxhat_xhat += dxhat * xhat;
        dw[i] += dy[i] * xhat;
        db[i] += dy[i];
      }
      mean_dxhat /= D;
      mean_dxhat_xhat /= D;
      for (int i = 0; i < D; ++i) {
        const float xhat = (x[i] - m) * s;
        dx[i] += s * (dy[i] * weight[i] - mean_dxhat - xhat * mean_dxhat_xhat);
      }
    }
  }
  for (int t = 0; t < threads; ++t) {
    const float* dw = partial.data() + size_t(t) * 2 * D;
    for (int i = 0; i < D; ++i) {
      dweight[i] += dw[i];
      dbias[i] += dw[D + i];
    }
  }
}

}  // namespace minivit
