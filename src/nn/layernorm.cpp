#include "minivit/nn/layernorm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "minivit/kernels/threads.h"

namespace minivit {
MINIVIT_ISA_BEGIN

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int R, int D) {
  for_ranges(R, int64_t(R) * D > 32768, [&](int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
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
  });
}

// Rows [begin, end): dinp += the gradient through the normalisation.
static void backward_input_rows(float* dinp, const float* dout, const float* inp,
                                const float* weight, const float* mean, const float* rstd,
                                int64_t begin, int64_t end, int D, const float* dinp_base) {
  for (int64_t r = begin; r < end; ++r) {
    const float* x = inp + r * D;
    const float* dy = dout + r * D;
    float* dx = dinp + r * D;
    const float* base = dinp_base ? dinp_base + r * D : dx;
    const float m = mean[r], s = rstd[r];
    // xhat = (x - m) * s;  dxhat = dy * weight
    float mean_dxhat = 0.0f, mean_dxhat_xhat = 0.0f;
#pragma omp simd reduction(+ : mean_dxhat, mean_dxhat_xhat)
    for (int i = 0; i < D; ++i) {
      const float xhat = (x[i] - m) * s;
      const float dxhat = dy[i] * weight[i];
      mean_dxhat += dxhat;
      mean_dxhat_xhat += dxhat * xhat;
    }
    mean_dxhat /= D;
    mean_dxhat_xhat /= D;
    for (int i = 0; i < D; ++i) {
      const float xhat = (x[i] - m) * s;
      dx[i] = base[i] + s * (dy[i] * weight[i] - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
}

void layernorm_backward_input(float* dinp, const float* dout, const float* inp,
                              const float* weight, const float* mean, const float* rstd, int R,
                              int D, const float* dinp_base) {
  for_ranges(R, int64_t(R) * D > 32768, [&](int64_t begin, int64_t end) {
    backward_input_rows(dinp, dout, inp, weight, mean, rstd, begin, end, D, dinp_base);
  });
}

void layernorm_backward_params(float* dweight, float* dbias, const float* dout, const float* inp,
                               const float* mean, const float* rstd, int R, int D,
                               float* partials) {
  // The rows are cut into max_work_blocks() slices (one for small inputs), whatever the
  // thread count; each slice sums its rows' weight gradients in row order into a private
  // buffer, and the slices are added in slice order, so the result is the same on any
  // number of threads.
  const int slices = (int64_t(R) * D > 32768) ? std::min(max_work_blocks(), R) : 1;
  std::fill_n(partials, int64_t(slices) * 2 * D, 0.0f);
  auto sum_slice = [&](int slice) {
    float* dw = partials + size_t(slice) * 2 * D;
    float* db = dw + D;
    const int row_begin = int(int64_t(R) * slice / slices);
    const int row_end = int(int64_t(R) * (slice + 1) / slices);
    for (int r = row_begin; r < row_end; ++r) {
      const float* x = inp + int64_t(r) * D;
      const float* dy = dout + int64_t(r) * D;
      const float m = mean[r], s = rstd[r];
#pragma omp simd
      for (int i = 0; i < D; ++i) {
        const float xhat = (x[i] - m) * s;
        dw[i] += dy[i] * xhat;
        db[i] += dy[i];
      }
    }
  };
  if (slices > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int slice = 0; slice < slices; ++slice) sum_slice(slice);
  } else {
    for (int slice = 0; slice < slices; ++slice) sum_slice(slice);
  }
  for (int slice = 0; slice < slices; ++slice) {
    const float* dw = partials + size_t(slice) * 2 * D;
    for (int i = 0; i < D; ++i) {
      dweight[i] += dw[i];
      dbias[i] += dw[D + i];
    }
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int R, int D, float* partials) {
  layernorm_backward_input(dinp, dout, inp, weight, mean, rstd, R, D);
  layernorm_backward_params(dweight, dbias, dout, inp, mean, rstd, R, D, partials);
}

int64_t layernorm_partials_floats(int D) { return int64_t(max_work_blocks()) * 2 * D; }

MINIVIT_ISA_END
}  // namespace minivit
