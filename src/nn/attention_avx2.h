#pragma once
// The attention core's rows with the scores held in ymm registers from the product to the
// softmax (forward) or to dS (backward), for T up to 64 tokens (at most 8 vectors of 8 a
// row) and a compiled head size: attention_avx512.h's method at the AVX2 level, whose 16
// registers hold fewer rows. The portable loops (attention_tiles.h) computed 64 score
// columns for 49 tokens, stored them with their padding, read them back for the max, the
// exps and the sum, and copied the weights out: the attention core was a third of an
// evaluation at this level. Internal to src/nn (attention.cpp is the one user); only in
// builds for AVX2 without AVX-512.
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
#include <immintrin.h>

#include <cstdint>
#include <limits>
#include "minivit/kernels/isa.h"
#include "minivit/kernels/vecmath.h"

namespace minivit {
MINIVIT_ISA_BEGIN
namespace attention_avx2 {

constexpr int kMaxVectors = 8;  // 64 tokens

// Vectors of 8 that a row of T tokens takes.
constexpr int vectors_of(int T) { return (T + 7) / 8; }

// exp(x) for x <= 0 lane by lane, by exp_nonpositive's steps (vecmath.h).
inline __m256 exp_nonpositive(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  using namespace expf_steps;
  const __m256 round_magic = _mm256_set1_ps(kRoundMagic);
  const __m256 n =
      _mm256_sub_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(kLog2e), round_magic), round_magic);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2High), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(kLn2Low), r);
  __m256 p = _mm256_set1_ps(kPolynomial[0]);
  for (int i = 1; i < kTerms; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kPolynomial[i]));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r);
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  const __m256i exponent =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
}

// The 8 lanes of v folded by max (kMax) or sum into every lane: the 128-bit halves, then
// lanes 2 apart, then neighbours.
template <bool kMax>
inline __m256 fold_lanes(__m256 v) {
  auto op = [](__m256 a, __m256 b) { return kMax ? _mm256_max_ps(a, b) : _mm256_add_ps(a, b); };
  v = op(v, _mm256_permute2f128_ps(v, v, 0x01));
  v = op(v, _mm256_permute_ps(v, 0x4E));
  return op(v, _mm256_permute_ps(v, 0xB1));
}

// All ones in the lanes of vector v whose tokens are below `limit` (8 v + lane < limit).
inline __m256i lanes_below(int limit, int v) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(limit - 8 * v), lane);
}

// The rows a call of the functions below takes at V vectors a row, so that its R V
// accumulators make enough independent chains of FMAs to cover their latency (about 8) and
// still leave registers for the broadcasts and the exps' constants: one row of 49 tokens
// (7 vectors) a call, four of 15 (2 vectors, the default model's kept patches). Divides 4.
constexpr int rows_per_call(int V) { return V <= 2 ? 4 : V <= 4 ? 2 : 1; }

// acc (R, V vectors) = a (R, kDh; row stride lda) . the first 8 V columns of kt (kDh, ld_kt).
template <int kDh, int V, int R>
inline void rows_times_kt(__m256 (&acc)[R][V], const float* a, int lda, const float* kt,
                          int ld_kt) {
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int d = 0; d < kDh; ++d) {
    __m256 k[V];
    for (int v = 0; v < V; ++v) k[v] = _mm256_loadu_ps(kt + int64_t(d) * ld_kt + 8 * v);
    for (int r = 0; r < R; ++r) {
      const __m256 ad = _mm256_broadcast_ss(a + int64_t(r) * lda + d);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(ad, k[v], acc[r][v]);
    }
  }
}

// P (R, T; row stride T) = the softmax of each row of scores s (R, V vectors), whose lanes
// past T are padding. With kMaskOwn, the score of row r against token diagonal + r (its own,
// for locality self-attention) is the lowest float first, which the softmax weighs as the
// padding. Always inlined, so that s stays in the registers.
template <int V, int R, bool kMaskOwn = false>
[[gnu::always_inline]] inline void softmax_rows(float* P, __m256 (&s)[R][V], int T,
                                                int diagonal = 0) {
  const __m256 lowest = _mm256_set1_ps(std::numeric_limits<float>::lowest());
  const __m256i live_last = lanes_below(T, V - 1);
  for (int r = 0; r < R; ++r) {
    __m256 row_max = lowest;
    for (int v = 0; v < V; ++v) {
      if (v == V - 1)  // padding: exp() = 0
        s[r][v] = _mm256_blendv_ps(lowest, s[r][v], _mm256_castsi256_ps(live_last));
      if constexpr (kMaskOwn) {
        const __m256i is_own = _mm256_cmpeq_epi32(_mm256_set1_epi32(diagonal + r - 8 * v),
                                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        s[r][v] = _mm256_blendv_ps(s[r][v], lowest, _mm256_castsi256_ps(is_own));
      }
      row_max = _mm256_max_ps(row_max, s[r][v]);
    }
    row_max = fold_lanes<true>(row_max);
    __m256 row_sum = _mm256_setzero_ps();
    for (int v = 0; v < V; ++v) {
      s[r][v] = exp_nonpositive(_mm256_sub_ps(s[r][v], row_max));
      row_sum = _mm256_add_ps(row_sum, s[r][v]);
    }
    const __m256 inv = _mm256_div_ps(_mm256_set1_ps(1.0f), fold_lanes<false>(row_sum));
    float* row = P + int64_t(r) * T;
    for (int v = 0; v + 1 < V; ++v) _mm256_storeu_ps(row + 8 * v, _mm256_mul_ps(s[r][v], inv));
    _mm256_maskstore_ps(row + 8 * (V - 1), live_last, _mm256_mul_ps(s[r][V - 1], inv));
  }
}

// P (R, T; row stride T) = softmax(scale * q K^T) for R query rows q (row stride ldq),
// kt = K^T (kDh, ld_kt) with zero padding columns, V = vectors_of(T); kMaskOwn as in
// softmax_rows.
template <int kDh, int V, int R, bool kMaskOwn = false>
void score_softmax_rows(float* P, const float* q, int ldq, const float* kt, int ld_kt,
                        float scale, int T, int diagonal = 0) {
  static_assert(V >= 1 && V <= kMaxVectors && R >= 1);
  __m256 s[R][V];
  rows_times_kt<kDh, V, R>(s, q, ldq, kt, ld_kt);
  const __m256 vscale = _mm256_set1_ps(scale);
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) s[r][v] = _mm256_mul_ps(vscale, s[r][v]);
  softmax_rows<V, R, kMaskOwn>(P, s, T, diagonal);
}

// P (R, T; row stride T) = the softmax of R rows of additive scores, sum_d v_d tanh(q_rd +
// k_jd), from exp_q (R, kDh; row stride kDh) = e^2q of the query rows and exp_kt (kDh,
// ld_kt) = e^2K^T, any positive value in its padding columns: each term (v_d P - v_d) /
// (P + 1) with P = e^2q e^2k, as attention_tiles::additive_rows_from_exps computes it.
template <int kDh, int V, int R>
void additive_softmax_rows(float* P, const float* exp_q, const float* exp_kt, int ld_kt,
                           const float* v, int T) {
  static_assert(V >= 1 && V <= kMaxVectors && R >= 1);
  __m256 s[R][V];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < V; ++c) s[r][c] = _mm256_setzero_ps();
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int d = 0; d < kDh; ++d) {
    const __m256 vd = _mm256_set1_ps(v[d]);
    for (int r = 0; r < R; ++r) {
      const float ea = exp_q[int64_t(r) * kDh + d];
      const __m256 vea = _mm256_set1_ps(v[d] * ea), eav = _mm256_set1_ps(ea);
      for (int c = 0; c < V; ++c) {
        const __m256 ek = _mm256_loadu_ps(exp_kt + int64_t(d) * ld_kt + 8 * c);
        s[r][c] = _mm256_add_ps(s[r][c], _mm256_div_ps(_mm256_fmsub_ps(vea, ek, vd),
                                                       _mm256_fmadd_ps(eav, ek, one)));
      }
    }
  }
  softmax_rows<V, R>(P, s, T);
}

// ds (R, ld_ds) = scale * P * (dP - <dP, P>) with dP = dO V^T, for R rows of dO (row
// stride ldo), vt = V^T (kDh, ld_vt) with zero padding columns and P (R, T; row stride T):
// the first V vectors of each row of ds, zero past T.
template <int kDh, int V, int R>
void softmax_backward_rows(float* ds, int ld_ds, const float* dO, int ldo, const float* vt,
                           int ld_vt, const float* P, float scale, int T) {
  static_assert(V >= 1 && V <= kMaxVectors && R >= 1);
  __m256 acc[R][V];
  rows_times_kt<kDh, V, R>(acc, dO, ldo, vt, ld_vt);
  const __m256i live_last = lanes_below(T, V - 1);
  const __m256 vscale = _mm256_set1_ps(scale);
  // P's rows are read twice, from L1, rather than held beside acc in the registers.
  auto load_p = [&](int r, int v) {
    const float* pr = P + int64_t(r) * T + 8 * v;
    return v + 1 < V ? _mm256_loadu_ps(pr) : _mm256_maskload_ps(pr, live_last);
  };
  for (int r = 0; r < R; ++r) {
    __m256 dot = _mm256_mul_ps(acc[r][0], load_p(r, 0));
    for (int v = 1; v < V; ++v) dot = _mm256_fmadd_ps(acc[r][v], load_p(r, v), dot);
    dot = fold_lanes<false>(dot);
    float* out = ds + int64_t(r) * ld_ds;
    for (int v = 0; v < V; ++v)
      _mm256_storeu_ps(out + 8 * v, _mm256_mul_ps(_mm256_mul_ps(load_p(r, v),
                                                                _mm256_sub_ps(acc[r][v], dot)),
                                                  vscale));
  }
}

}  // namespace attention_avx2
MINIVIT_ISA_END
}  // namespace minivit
#endif
