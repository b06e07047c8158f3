#include "minivit/nn/layernorm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "minivit/kernels/threads.h"
#include "minivit/kernels/transpose16.h"
#include "minivit/kernels/transpose8.h"

namespace minivit {
MINIVIT_ISA_BEGIN

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define MINIVIT_LAYERNORM_IN_LANES 1
MINIVIT_INTRINSICS_BEGIN
// The row loops' `omp simd` reductions sum a row in the lanes of one vector, lane k taking
// elements k, k + n, ... in order, then the lanes one after another from lane 0, through
// the stack: a chain of n dependent additions per row and sum, which made LayerNorm 6% of a
// one-image forward on AVX-512 and 2.4% of a one-thread training run on AVX2. Where D is a
// multiple of n, n rows go at once and their lane sums are transposed, so that one vector
// addition takes the next lane of all n rows: every sum, and so every output, rounds
// exactly as the row loop's. Lanes is the vector of the level: 16 floats in AVX-512
// builds, 8 in AVX2 ones.
#if defined(__AVX512F__)
struct Lanes {
  using V = __m512;
  static constexpr int n = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V sqrt(V a) { return _mm512_sqrt_ps(a); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }    // a b + c
  static V fmsub(V a, V b, V c) { return _mm512_fmsub_ps(a, b, c); }    // a b - c
  static V fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a b
  static void transpose(V (&rows)[n]) { transpose16(rows); }
};
#else
struct Lanes {
  using V = __m256;
  static constexpr int n = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V sqrt(V a) { return _mm256_sqrt_ps(a); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V fmsub(V a, V b, V c) { return _mm256_fmsub_ps(a, b, c); }
  static V fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
  static void transpose(V (&rows)[n]) { transpose8(rows); }
};
#endif
using V = Lanes::V;
constexpr int kLanes = Lanes::n;

// lanes[i]: row i's lane sums; the result's lane i: row i's sum, its lanes added in order.
static V sum_lanes_of_rows(V (&lanes)[kLanes]) {
  Lanes::transpose(lanes);  // lanes[k]: lane k's sum of every row
  V total = Lanes::zero();
  for (int k = 0; k < kLanes; ++k) total = Lanes::add(total, lanes[k]);
  return total;
}

// Rows 0 .. n-1 (n <= kLanes) of the forward.
static void forward_rows_in_lanes(float* out, float* mean, float* rstd, const float* inp,
                                  const float* weight, const float* bias, int D, int n) {
  const V width = Lanes::set1(float(D));
  V lanes[kLanes];
  for (int i = n; i < kLanes; ++i) lanes[i] = Lanes::zero();
  for (int i = 0; i < n; ++i) {
    const float* x = inp + int64_t(i) * D;
    V acc = Lanes::zero();
    for (int c = 0; c < D; c += kLanes) acc = Lanes::add(acc, Lanes::load(x + c));
    lanes[i] = acc;
  }
  alignas(64) float row_mean[kLanes], row_rstd[kLanes];
  const V m = Lanes::div(sum_lanes_of_rows(lanes), width);
  Lanes::store(row_mean, m);
  for (int i = 0; i < n; ++i) {
    const float* x = inp + int64_t(i) * D;
    const V mi = Lanes::set1(row_mean[i]);
    V acc = Lanes::zero();
    for (int c = 0; c < D; c += kLanes) {
      const V d = Lanes::sub(Lanes::load(x + c), mi);
      acc = Lanes::fmadd(d, d, acc);
    }
    lanes[i] = acc;
  }
  const V var = Lanes::div(sum_lanes_of_rows(lanes), width);
  Lanes::store(row_rstd, Lanes::div(Lanes::set1(1.0f),
                                    Lanes::sqrt(Lanes::add(var, Lanes::set1(kLayerNormEps)))));
  for (int i = 0; i < n; ++i) {
    const float* x = inp + int64_t(i) * D;
    float* y = out + int64_t(i) * D;
    const V mi = Lanes::set1(row_mean[i]), si = Lanes::set1(row_rstd[i]);
    for (int c = 0; c < D; c += kLanes) {
      const V xhat_s = Lanes::mul(Lanes::sub(Lanes::load(x + c), mi), si);
      Lanes::store(y + c, Lanes::fmadd(xhat_s, Lanes::load(weight + c), Lanes::load(bias + c)));
    }
    mean[i] = row_mean[i];
    rstd[i] = row_rstd[i];
  }
}

#if defined(__AVX512F__)
// backward_input_rows (below) for rows 0 .. n-1 (n <= kLanes): its two row sums through
// sum_lanes_of_rows, every other value by the operations the compiler makes of its loops
// (the products and differences it fuses, it fuses here), so every gradient has the row
// loop's bits. Row by row the two chains of additions took 3% of the default model's
// training step on AVX-512. AVX2 builds keep the row loop: on a Zen 3 these rows ran 1.45x
// as fast alone in L2 but slower inside a training step (1.68% of a one-thread run's
// samples against 1.54%), where the pass waits on memory more than on its sums.
#define MINIVIT_LAYERNORM_BACKWARD_IN_LANES 1
static void backward_input_rows_in_lanes(float* dinp, const float* dout, const float* inp,
                                         const float* weight, const float* mean,
                                         const float* rstd, int D, int n,
                                         const float* dinp_base) {
  const V width = Lanes::set1(float(D));
  V dxhat_lanes[kLanes], product_lanes[kLanes];
  for (int i = n; i < kLanes; ++i) dxhat_lanes[i] = product_lanes[i] = Lanes::zero();
  for (int i = 0; i < n; ++i) {
    const float* x = inp + int64_t(i) * D;
    const float* dy = dout + int64_t(i) * D;
    const V mi = Lanes::set1(mean[i]), si = Lanes::set1(rstd[i]);
    V sum = Lanes::zero(), product = Lanes::zero();
    for (int c = 0; c < D; c += kLanes) {
      const V xhat = Lanes::mul(Lanes::sub(Lanes::load(x + c), mi), si);
      const V dxhat = Lanes::mul(Lanes::load(dy + c), Lanes::load(weight + c));
      sum = Lanes::add(sum, dxhat);
      product = Lanes::fmadd(xhat, dxhat, product);
    }
    dxhat_lanes[i] = sum;
    product_lanes[i] = product;
  }
  alignas(64) float mean_dxhat[kLanes], mean_dxhat_xhat[kLanes];
  Lanes::store(mean_dxhat, Lanes::div(sum_lanes_of_rows(dxhat_lanes), width));
  Lanes::store(mean_dxhat_xhat, Lanes::div(sum_lanes_of_rows(product_lanes), width));
  for (int i = 0; i < n; ++i) {
    const float* x = inp + int64_t(i) * D;
    const float* dy = dout + int64_t(i) * D;
    float* dx = dinp + int64_t(i) * D;
    const float* base = dinp_base ? dinp_base + int64_t(i) * D : dx;
    const V mi = Lanes::set1(mean[i]), si = Lanes::set1(rstd[i]);
    const V a = Lanes::set1(mean_dxhat[i]), b = Lanes::set1(mean_dxhat_xhat[i]);
    for (int c = 0; c < D; c += kLanes) {
      // s (dy weight - a - xhat b) + base
      const V t = Lanes::fmsub(Lanes::load(dy + c), Lanes::load(weight + c), a);
      const V xhat = Lanes::mul(Lanes::sub(Lanes::load(x + c), mi), si);
      Lanes::store(dx + c, Lanes::fmadd(Lanes::fnmadd(xhat, b, t), si, Lanes::load(base + c)));
    }
  }
}
#endif
MINIVIT_INTRINSICS_END
#endif

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int R, int D) {
  for_ranges(R, int64_t(R) * D > 32768, [&](int64_t r0, int64_t r1) {
#if defined(MINIVIT_LAYERNORM_IN_LANES)
  if (D % kLanes == 0) {
    for (; r0 < r1; r0 += kLanes)
      forward_rows_in_lanes(out + r0 * D, mean + r0, rstd + r0, inp + r0 * D, weight, bias, D,
                            int(std::min<int64_t>(kLanes, r1 - r0)));
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
#if defined(MINIVIT_LAYERNORM_BACKWARD_IN_LANES)
    if (D % kLanes == 0) {
      for (int64_t r = begin; r < end; r += kLanes)
        backward_input_rows_in_lanes(dinp + r * D, dout + r * D, inp + r * D, weight, mean + r,
                                     rstd + r, D, int(std::min<int64_t>(kLanes, end - r)),
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
