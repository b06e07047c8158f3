#include "minivit/nn/layernorm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "minivit/kernels/threads.h"
#include "minivit/kernels/transpose16.h"

namespace minivit {
MINIVIT_ISA_BEGIN

#if defined(__AVX512F__)
MINIVIT_INTRINSICS_BEGIN
// Sixteen rows of the forward at once, for D a multiple of 16. The row loop's `omp simd`
// reductions sum each of the 16 lanes over the row, then the lanes one after another from
// lane 0, through the stack: a chain of 16 dependent additions per row and sum, which made
// LayerNorm 6% of a one-image forward. Here the rows' lane sums are transposed so that one
// vector addition takes the next lane of all sixteen rows: every sum, and so every output,
// rounds exactly as the row loop's.
static __m512 sum_lanes_of_rows(__m512 (&lanes)[16]) {
  transpose16(lanes);  // lanes[k]: lane k's sum of every row
  __m512 total = _mm512_setzero_ps();
  for (int k = 0; k < 16; ++k) total = _mm512_add_ps(total, lanes[k]);
  return total;
}

// Rows 0 .. n-1 (n <= 16).
static void forward_16_rows(float* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int D, int n) {
  const __m512 width = _mm512_set1_ps(float(D));
  __m512 lanes[16];
  for (int i = n; i < 16; ++i) lanes[i] = _mm512_setzero_ps();
  for (int i = 0; i < n; ++i) {
    const float* x = inp + int64_t(i) * D;
    __m512 acc = _mm512_setzero_ps();
    for (int c = 0; c < D; c += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(x + c));
    lanes[i] = acc;
  }
  const __m512 m = _mm512_div_ps(sum_lanes_of_rows(lanes), width);
  alignas(64) float row_mean[16];
  _mm512_store_ps(row_mean, m);
  for (int i = 0; i < n; ++i) {
    const float* x = inp + int64_t(i) * D;
    const __m512 mi = _mm512_set1_ps(row_mean[i]);
    __m512 acc = _mm512_setzero_ps();
    for (int c = 0; c < D; c += 16) {
      const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + c), mi);
      acc = _mm512_fmadd_ps(d, d, acc);
    }
    lanes[i] = acc;
  }
  const __m512 var = _mm512_div_ps(sum_lanes_of_rows(lanes), width);
  const __m512 s = _mm512_div_ps(
      _mm512_set1_ps(1.0f), _mm512_sqrt_ps(_mm512_add_ps(var, _mm512_set1_ps(kLayerNormEps))));
  alignas(64) float row_rstd[16];
  _mm512_store_ps(row_rstd, s);
  for (int i = 0; i < n; ++i) {
    const float* x = inp + int64_t(i) * D;
    float* y = out + int64_t(i) * D;
    const __m512 mi = _mm512_set1_ps(row_mean[i]), si = _mm512_set1_ps(row_rstd[i]);
    for (int c = 0; c < D; c += 16) {
      const __m512 xhat_s = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + c), mi), si);
      _mm512_storeu_ps(y + c, _mm512_fmadd_ps(xhat_s, _mm512_loadu_ps(weight + c),
                                              _mm512_loadu_ps(bias + c)));
    }
  }
  const __mmask16 rows = __mmask16((1u << n) - 1);
  _mm512_mask_storeu_ps(mean, rows, m);
  _mm512_mask_storeu_ps(rstd, rows, s);
}

// backward_input_rows (below) for rows 0 .. n-1 (n <= 16), D a multiple of 16: its two row
// sums through sum_lanes_of_rows, every other value by the operations the compiler makes of
// its loops (the products and differences it fuses, it fuses here), so every gradient has
// the row loop's bits. Row by row the two chains of 16 additions took 3% of the default
// model's training step.
static void backward_input_16_rows(float* dinp, const float* dout, const float* inp,
                                   const float* weight, const float* mean, const float* rstd,
                                   int D, int n, const float* dinp_base) {
  const __m512 width = _mm512_set1_ps(float(D));
  __m512 dxhat_lanes[16], product_lanes[16];
  for (int i = n; i < 16; ++i) dxhat_lanes[i] = product_lanes[i] = _mm512_setzero_ps();
  for (int i = 0; i < n; ++i) {
    const float* x = inp + int64_t(i) * D;
    const float* dy = dout + int64_t(i) * D;
    const __m512 mi = _mm512_set1_ps(mean[i]), si = _mm512_set1_ps(rstd[i]);
    __m512 sum = _mm512_setzero_ps(), product = _mm512_setzero_ps();
    for (int c = 0; c < D; c += 16) {
      const __m512 xhat = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + c), mi), si);
      const __m512 dxhat = _mm512_mul_ps(_mm512_loadu_ps(dy + c), _mm512_loadu_ps(weight + c));
      sum = _mm512_add_ps(sum, dxhat);
      product = _mm512_fmadd_ps(xhat, dxhat, product);
    }
    dxhat_lanes[i] = sum;
    product_lanes[i] = product;
  }
  alignas(64) float mean_dxhat[16], mean_dxhat_xhat[16];
  _mm512_store_ps(mean_dxhat, _mm512_div_ps(sum_lanes_of_rows(dxhat_lanes), width));
  _mm512_store_ps(mean_dxhat_xhat, _mm512_div_ps(sum_lanes_of_rows(product_lanes), width));
  for (int i = 0; i < n; ++i) {
    const float* x = inp + int64_t(i) * D;
    const float* dy = dout + int64_t(i) * D;
    float* dx = dinp + int64_t(i) * D;
    const float* base = dinp_base ? dinp_base + int64_t(i) * D : dx;
    const __m512 mi = _mm512_set1_ps(mean[i]), si = _mm512_set1_ps(rstd[i]);
    const __m512 a = _mm512_set1_ps(mean_dxhat[i]), b = _mm512_set1_ps(mean_dxhat_xhat[i]);
    for (int c = 0; c < D; c += 16) {
      // s (dy weight - a - xhat b) + base
      const __m512 t = _mm512_fmsub_ps(_mm512_loadu_ps(dy + c), _mm512_loadu_ps(weight + c), a);
      const __m512 xhat = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + c), mi), si);
      _mm512_storeu_ps(dx + c, _mm512_fmadd_ps(_mm512_fnmadd_ps(xhat, b, t), si,
                                               _mm512_loadu_ps(base + c)));
    }
  }
}
MINIVIT_INTRINSICS_END
#endif

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int R, int D) {
  for_ranges(R, int64_t(R) * D > 32768, [&](int64_t r0, int64_t r1) {
#if defined(__AVX512F__)
  if (D % 16 == 0) {
    for (; r0 < r1; r0 += 16)
      forward_16_rows(out + r0 * D, mean + r0, rstd + r0, inp + r0 * D, weight, bias, D,
                      int(std::min<int64_t>(16, r1 - r0)));
    return;
  }
#endif
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
#if defined(__AVX512F__)
    if (D % 16 == 0) {
      for (int64_t r = begin; r < end; r += 16)
        backward_input_16_rows(dinp + r * D, dout + r * D, inp + r * D, weight, mean + r,
                               rstd + r, D, int(std::min<int64_t>(16, end - r)),
                               dinp_base ? dinp_base + r * D : nullptr);
      return;
    }
#endif
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
