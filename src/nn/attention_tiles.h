#pragma once
// The attention core's tile kernels: small dense loops over one (batch, head), a few query
// rows at a time, with fixed trip counts the compiler turns into vector registers. Internal
// to src/nn (attention.cpp is their one user).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "minivit/kernels/vecmath.h"
#include "minivit/kernels/isa.h"
#include "minivit/kernels/transpose16.h"
#include "minivit/kernels/transpose8.h"
#include "attention_vectors.h"

namespace minivit {
MINIVIT_ISA_BEGIN
namespace attention_tiles {

constexpr int kTile = 16;  // score columns per step
constexpr int kRows = 4;   // query rows per step: independent sums keep the FMA units busy
// Whether two of the rows left after the steps of kRows share a step. A row alone runs its
// sums as one dependent chain: at 14 tokens (12 + 2) the AVX2 level's two lone rows took
// as long as half the other twelve. AVX-512 builds, not measured with it, keep one at a time.
#if defined(__AVX2__) && !defined(__AVX512F__)
constexpr bool kPairLeftRows = true;
#else
constexpr bool kPairLeftRows = false;
#endif

inline int padded_tokens(int T) { return (T + kTile - 1) / kTile * kTile; }

// A head's rows [0, T) as its calls take them: steps of kStep rows, then, where
// kPairLeftRows and `pair` allow, two of the rows left in one call, then the rest one at a
// time. rows_of(i, n) makes the call for rows [i, i + n), n a std::integral_constant.
// Inlined into each caller, as the loops it holds once were written there (left to GCC, the
// 14-token forward took 2-3% longer in parts-bench).
template <int kStep, class RowsOf>
[[gnu::always_inline]] inline void for_row_steps(int T, bool pair, RowsOf&& rows_of) {
  int i = 0;
  for (; i + kStep <= T; i += kStep) rows_of(i, std::integral_constant<int, kStep>{});
  if constexpr (kPairLeftRows && kStep > 2) {
    if (pair && i + 2 <= T) {
      rows_of(i, std::integral_constant<int, 2>{});
      i += 2;
    }
  }
  for (; i < T; ++i) rows_of(i, std::integral_constant<int, 1>{});
}

// kt (Dh, Tp) = x^T for x (T, Dh) with row stride ld; the padding columns keep what they
// hold. Head sizes of whole vectors go 16 x 16 (AVX-512) or 8 x 8 (AVX2) at a time in
// registers: element by element, K^T took most of a head's forward outside its products.
template <int kDh>
void transpose_head(float* __restrict kt, const float* __restrict x, int ld, int T, int dh) {
  const int Dh = kDh ? kDh : dh;
  const int Tp = padded_tokens(T);
#if defined(__AVX512F__)
  if constexpr (kDh > 0 && kDh % 16 == 0) {
    for (int j0 = 0; j0 < T; j0 += 16) {
      const int rows = std::min(16, T - j0);
      const __mmask16 live = __mmask16((1u << rows) - 1);
      for (int d0 = 0; d0 < kDh; d0 += 16) {
        __m512 r[16];
        for (int i = 0; i < 16; ++i)
          r[i] = i < rows ? _mm512_loadu_ps(x + int64_t(j0 + i) * ld + d0) : _mm512_setzero_ps();
        transpose16(r);
        for (int i = 0; i < 16; ++i) _mm512_mask_storeu_ps(kt + (d0 + i) * Tp + j0, live, r[i]);
      }
    }
    return;
  }
#elif defined(__AVX2__)
  if constexpr (kDh > 0 && kDh % 8 == 0) {
    for (int j0 = 0; j0 < T; j0 += 8) {
      const int rows = std::min(8, T - j0);
      const __m256 live = _mm256_castsi256_ps(
          _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
      for (int d0 = 0; d0 < kDh; d0 += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; ++i)
          r[i] = i < rows ? _mm256_loadu_ps(x + int64_t(j0 + i) * ld + d0) : _mm256_setzero_ps();
        transpose8(r);
        // The last columns blended into what the padding holds: masked stores are slow on
        // some of these CPUs.
        for (int i = 0; i < 8; ++i) {
          float* to = kt + (d0 + i) * Tp + j0;
          _mm256_storeu_ps(to,
                           rows == 8 ? r[i] : _mm256_blendv_ps(_mm256_loadu_ps(to), r[i], live));
        }
      }
    }
    return;
  }
#endif
  for (int j = 0; j < T; ++j)
    for (int d = 0; d < Dh; ++d) kt[d * Tp + j] = x[int64_t(j) * ld + d];
}

// rows (R, Tp) = alpha * (sums over d < Dh of R x Tp terms), kTile columns at a time: for
// each tile of columns j0 .. j0+kTile-1, add_term(tile, d, j0) adds d's terms into a local
// (R, kTile) array the compiler keeps in registers. The score kernels below are this loop
// with their own term.
template <int R, class AddTerm>
void sum_tiles_over_d(float* __restrict rows, int Tp, int Dh, float alpha, AddTerm&& add_term) {
  for (int j0 = 0; j0 < Tp; j0 += kTile) {
    float tile[R][kTile] = {};
    for (int d = 0; d < Dh; ++d) add_term(tile, d, j0);
    for (int r = 0; r < R; ++r)
#pragma omp simd
      for (int j = 0; j < kTile; ++j) rows[int64_t(r) * Tp + j0 + j] = alpha * tile[r][j];
  }
}

// rows (R, Tp) = alpha * a (R, Dh; row stride lda) . kt (Dh, Tp), kTile columns at a time.
template <int kDh, int R>
void rows_times_kt(float* __restrict rows, const float* __restrict a, int lda,
                   const float* __restrict kt, float alpha, int Tp, int dh) {
  sum_tiles_over_d<R>(rows, Tp, kDh ? kDh : dh, alpha, [&](float (&tile)[R][kTile], int d, int j0) {
    const float* k = kt + int64_t(d) * Tp + j0;
    for (int r = 0; r < R; ++r) {
      const float ad = a[int64_t(r) * lda + d];
#pragma omp simd
      for (int j = 0; j < kTile; ++j) tile[r][j] += ad * k[j];
    }
  });
}

// rows_times_x (below) with its sums in a local float array: the baseline level, and the
// shapes rows_times_x_in_vectors does not take.
template <int kDh, int R>
void rows_times_x_in_array(float* __restrict out, int ldo, const float* __restrict w, int ldw,
                           const float* __restrict x, int ldx, int T, bool add) {
  constexpr bool kTwoSums = two_sums<kDh, R>();
  float acc[R][kDh] = {}, acc_odd[R][kDh] = {};
  int j = 0;
  if constexpr (kTwoSums) {
    for (; j + 1 < T; j += 2) {
      const float* xj = x + int64_t(j) * ldx;
      const float* xk = xj + ldx;
      for (int r = 0; r < R; ++r) {
        const float wr = w[int64_t(r) * ldw + j], wk = w[int64_t(r) * ldw + j + 1];
#pragma omp simd
        for (int d = 0; d < kDh; ++d) {
          acc[r][d] += wr * xj[d];
          acc_odd[r][d] += wk * xk[d];
        }
      }
    }
  }
  for (; j < T; ++j) {  // every j with one sum; the last odd one with two
    const float* xj = x + int64_t(j) * ldx;
    for (int r = 0; r < R; ++r) {
      const float wr = w[int64_t(r) * ldw + j];
#pragma omp simd
      for (int d = 0; d < kDh; ++d) acc[r][d] += wr * xj[d];
    }
  }
  for (int r = 0; r < R; ++r) {
    float* o = out + int64_t(r) * ldo;
#pragma omp simd
    for (int d = 0; d < kDh; ++d) {
      const float sum = kTwoSums ? acc[r][d] + acc_odd[r][d] : acc[r][d];
      o[d] = add ? o[d] + sum : sum;
    }
  }
}

// out (R, Dh; row stride ldo) (+)= w (R, T; row stride ldw) . x (T, Dh; row stride ldx).
template <int kDh, int R>
void rows_times_x(float* __restrict out, int ldo, const float* __restrict w, int ldw,
                  const float* __restrict x, int ldx, int T, bool add) {
  static_assert(kDh > 0, "a compiled head size");
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  if constexpr (sums_in_vectors<kDh, R>())
    rows_times_x_in_vectors<kDh, R>(out, ldo, w, ldw, x, ldx, T, add);
  else
#endif
    rows_times_x_in_array<kDh, R>(out, ldo, w, ldw, x, ldx, T, add);
}

// The same for a head size known only at run time, one row at a time.
inline void rows_times_x_any(float* __restrict out, int ldo, const float* __restrict w, int ldw,
                      const float* __restrict x, int ldx, int T, int Dh, int R, bool add) {
  for (int r = 0; r < R; ++r) {
    float* o = out + int64_t(r) * ldo;
    if (!add)
      for (int d = 0; d < Dh; ++d) o[d] = 0.0f;
    for (int j = 0; j < T; ++j) {
      const float wr = w[int64_t(r) * ldw + j];
      const float* xj = x + int64_t(j) * ldx;
      for (int d = 0; d < Dh; ++d) o[d] += wr * xj[d];
    }
  }
}

template <int kDh, int R>
void rows_times_x_dispatch(float* out, int ldo, const float* w, int ldw, const float* x, int ldx,
                           int T, int Dh, bool add) {
  if constexpr (kDh > 0)
    rows_times_x<kDh, R>(out, ldo, w, ldw, x, ldx, T, add);
  else
    rows_times_x_any(out, ldo, w, ldw, x, ldx, T, Dh, R, add);
}

// acc (T, Dh) += w (R, T; row stride ldw)^T . a (R, Dh; row stride lda): the outer
// products of R rows added into a head's gradient.
template <int kDh, int R>
void add_outer(float* __restrict acc, const float* __restrict w, int ldw,
               const float* __restrict a, int lda, int T, int dh) {
  const int Dh = kDh ? kDh : dh;
  for (int j = 0; j < T; ++j) {
    float* out = acc + int64_t(j) * Dh;
    for (int r = 0; r < R; ++r) {
      const float wr = w[int64_t(r) * ldw + j];
      const float* ar = a + int64_t(r) * lda;
#pragma omp simd
      for (int d = 0; d < Dh; ++d) out[d] += wr * ar[d];
    }
  }
}

// Softmax of row[0 .. T) in place, shifted by the row max for stability. The row is padded
// to Tp (a multiple of kTile) so that every loop runs in whole vectors: the padding holds
// the lowest float, which leaves the max unchanged and whose exp (clamped at exp(-87),
// about 1.6e-38) vanishes below the last bit of a sum that the max's exp(0) = 1 is in.
inline void softmax_padded(float* __restrict row, int T, int Tp) {
  if (Tp % kTile != 0) __builtin_unreachable();  // lets the loops run in whole vectors
  for (int j = T; j < Tp; ++j) row[j] = std::numeric_limits<float>::lowest();
  float maxv = row[0];
#pragma omp simd reduction(max : maxv)
  for (int j = 0; j < Tp; ++j) maxv = row[j] > maxv ? row[j] : maxv;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j < Tp; ++j) {
    row[j] = exp_nonpositive(row[j] - maxv);
    sum += row[j];
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int j = 0; j < Tp; ++j) row[j] *= inv;
}

// Additive scores: rows (R, Tp) = sum_d v_d tanh(a_rd + kt_dj), for a (R, Dh; row stride
// lda) the query rows and kt (Dh, Tp) = K^T, kTile columns at a time. The padding columns
// hold tanh(a_rd) sums, which the softmax overwrites.
template <int kDh, int R>
void additive_rows(float* __restrict rows, const float* __restrict a, int lda,
                   const float* __restrict kt, const float* __restrict v, int Tp, int dh) {
  sum_tiles_over_d<R>(rows, Tp, kDh ? kDh : dh, 1.0f, [&](float (&tile)[R][kTile], int d, int j0) {
    const float* k = kt + int64_t(d) * Tp + j0;
    const float vd = v[d];
    for (int r = 0; r < R; ++r) {
      const float ad = a[int64_t(r) * lda + d];
#pragma omp simd
      for (int j = 0; j < kTile; ++j) tile[r][j] += vd * tanh_inline(ad + k[j]);
    }
  });
}

// Backward of additive_rows for R query rows, given ds (R, Tp; zero in the padding) the
// gradient at the scores, with t = tanh(a_rd + kt_dj) recomputed:
//   da (R, Dh; row stride ldda) += v_d sum_j ds_rj (1 - t^2)
//   dkt (Dh, Tp)                += v_d sum_r ds_rj (1 - t^2)
//   dv (Dh)                     += sum_rj ds_rj t
template <int kDh, int R>
void additive_rows_backward(float* __restrict da, int ldda, float* __restrict dkt,
                            float* __restrict dv, const float* __restrict ds,
                            const float* __restrict a, int lda, const float* __restrict kt,
                            const float* __restrict v, int Tp, int dh) {
  const int Dh = kDh ? kDh : dh;
  for (int d = 0; d < Dh; ++d) {
    const float vd = v[d];
    float dv_sum = 0.0f;
    for (int r = 0; r < R; ++r) {
      const float ad = a[int64_t(r) * lda + d];
      const float* dsr = ds + int64_t(r) * Tp;
      float da_sum = 0.0f;
      for (int j0 = 0; j0 < Tp; j0 += kTile) {
        const float* k = kt + int64_t(d) * Tp + j0;
        float* dk = dkt + int64_t(d) * Tp + j0;
#pragma omp simd reduction(+ : da_sum, dv_sum)
        for (int j = 0; j < kTile; ++j) {
          const float t = tanh_inline(ad + k[j]);
          const float u = dsr[j0 + j] * (1.0f - t * t);
          da_sum += u;
          dv_sum += dsr[j0 + j] * t;
          dk[j] += vd * u;
        }
      }
      da[int64_t(r) * ldda + d] += vd * da_sum;
    }
    dv[d] += dv_sum;
  }
}

// The additive scores without a tanh per element: with e^2q and e^2k taken once per head,
// O(T Dh) exps, each of the T x T x Dh elements is
//   tanh(a + b) = (P - 1) / (P + 1) = 1 - 2r,  P = e^2a e^2b,  r = 1 / (P + 1),
// two FMAs and a division instead of a tanh (about 20 operations, an exp and a division among
// them); and 1 - t^2 = 4r(1 - r). The caller keeps |a|, |b| small enough for P to stay a
// normal float (see attention.h). A plain division: _mm512_rcp14_ps and a Newton step in
// its place made the forward scores 8-10% slower on the machine in the README.

// rows (R, Tp) = sum_d v_d tanh(a_rd + k_jd) = sum_d (v_d P - v_d) / (P + 1), for exp_a
// (R, Dh; row stride Dh) = e^2a of the query rows and exp_kt (Dh, Tp) = e^2K^T, with any
// positive value in the padding columns (which the softmax overwrites). v_d P - v_d is one
// FMA, rounded once even near P = 1 where tanh is small. Summing -2 v_d r onto sum_d v_d
// instead saves that FMA but cancels terms as large as sum_d |v_d|: at Dh 64 it failed the
// finite-difference check of v, and its scores were twice as far from the tanh path's.
template <int kDh, int R>
void additive_rows_from_exps(float* __restrict rows, const float* __restrict exp_a,
                             const float* __restrict exp_kt, const float* __restrict v, int Tp) {
  static_assert(kDh > 0, "a compiled head size");
  sum_tiles_over_d<R>(rows, Tp, kDh, 1.0f, [&](float (&tile)[R][kTile], int d, int j0) {
    const float* ek = exp_kt + int64_t(d) * Tp + j0;
    for (int r = 0; r < R; ++r) {
      const float ea = exp_a[int64_t(r) * kDh + d], v_ea = v[d] * ea;
#pragma omp simd
      for (int j = 0; j < kTile; ++j) tile[r][j] += (v_ea * ek[j] - v[d]) / (ea * ek[j] + 1.0f);
    }
  });
}

// Backward of additive_rows_from_exps, what additive_rows_backward computes, for exp_k
// (T, Dh) = e^2K: with w = ds r and g = w (1 - r), ds (1 - t^2) = 4g and ds t = ds - 2w, so
//   da (R, Dh; row stride ldda) += 4 v_d sum_j g_rjd
//   dk (T, Dh)                  += 4 v_d sum_r g_rjd
//   dv (Dh)                     += sum_rj ds_rj - 2 sum_rj w_rjd
// The vectors run along d, not j as in forward: every sum then stays in its lane (along j
// each d took five sums across a vector, which cost as much as the arithmetic), and the
// padding columns are skipped.
template <int kDh, int R>
void additive_rows_backward_from_exps(float* __restrict da, int ldda, float* __restrict dk,
                                      float* __restrict dv, const float* __restrict ds,
                                      const float* __restrict exp_a,
                                      const float* __restrict exp_k,
                                      const float* __restrict v, int T, int Tp) {
  static_assert(kDh > 0, "a compiled head size");
  float da_part[R][kDh] = {}, w_part[kDh] = {};
  float ds_sum = 0.0f;
  for (int j = 0; j < T; ++j) {
    const float* ek = exp_k + int64_t(j) * kDh;
    float dk_part[kDh] = {};
    for (int r = 0; r < R; ++r) {
      const float* ea = exp_a + int64_t(r) * kDh;
      const float dsj = ds[int64_t(r) * Tp + j];
      ds_sum += dsj;
#pragma omp simd
      for (int d = 0; d < kDh; ++d) {
        const float rd = 1.0f / (ea[d] * ek[d] + 1.0f);
        const float w = dsj * rd;
        const float g = w - w * rd;
        w_part[d] += w;
        da_part[r][d] += g;
        dk_part[d] += g;
      }
    }
    float* dkj = dk + int64_t(j) * kDh;
#pragma omp simd
    for (int d = 0; d < kDh; ++d) dkj[d] += 4.0f * v[d] * dk_part[d];
  }
  for (int r = 0; r < R; ++r)
#pragma omp simd
    for (int d = 0; d < kDh; ++d) da[int64_t(r) * ldda + d] += 4.0f * v[d] * da_part[r][d];
#pragma omp simd
  for (int d = 0; d < kDh; ++d) dv[d] += ds_sum - 2.0f * w_part[d];
}

}  // namespace attention_tiles
MINIVIT_ISA_END
}  // namespace minivit
