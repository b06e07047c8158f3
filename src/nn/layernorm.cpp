#include "minivit/nn/layernorm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "minivit/kernels/threads.h"

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
                        const float* rstd, int R, int D, float* partials) {
  // The rows are cut into max_work_blocks() slices (one for small inputs), whatever the
  // thread count; each slice sums its rows' weight gradients in row order into a private
  // buffer, and the slices are added in slice order, so the result is the same on any
  // number of threads.
  const int slices = (int64_t(R) * D > 32768) ? std::min(max_work_blocks(), R) : 1;
  std::fill_n(partials, int64_t(slices) * 2 * D, 0.0f);
#pragma omp parallel for schedule(static) if (slices > 1)
  for (int slice = 0; slice < slices; ++slice) {
    float* dw = partials + size_t(slice) * 2 * D;
    float* db = dw + D;
    const int row_begin = int(int64_t(R) * slice / slices);
    const int row_end = int(int64_t(R) * (slice + 1) / slices);
    for (int r = row_begin; r < row_end; ++r) {
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
  for (int slice = 0; slice < slices; ++slice) {
    const float* dw = partials + size_t(slice) * 2 * D;
    for (int i = 0; i < D; ++i) {
      dweight[i] += dw[i];
      dbias[i] += dw[D + i];
    }
  }
}

int64_t layernorm_partials_floats(int D) { return int64_t(max_work_blocks()) * 2 * D; }

}  // namespace minivit
