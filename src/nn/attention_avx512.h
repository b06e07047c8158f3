#pragma once
// The attention core's rows with the scores held in zmm registers from the product to the
// softmax (forward) or to dS (backward), for T up to 64 tokens (at most 4 vectors a row)
// and a compiled head size. The portable loops of attention_tiles.h wrote each score row
// out, then read it back for the max, the exp and the sum: the reads stalled on the stores
// they followed (partly scalar padding stores), and the compiler summed the 16 lanes one by
// one through the stack: together 12% of a training step's samples. Internal to src/nn
// (attention.cpp is the one user); only in builds for AVX-512.
#if defined(__AVX512F__)
// GCC 12 warns that the intrinsics' own undefined operands (`__Y = __Y`) are uninitialised
// (its bug 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a group of GCC's own, unknown to clang (the fuzz build)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <limits>
#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN
namespace attention_avx512 {

constexpr int kMaxVectors = 4;  // 64 tokens

// exp(x) for x <= 0 lane by lane, by exp_nonpositive's steps (vecmath.h).
inline __m512 exp_nonpositive(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 round_magic = _mm512_set1_ps(12582912.0f);
  const __m512 n = _mm512_sub_ps(
      _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), round_magic), round_magic);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r);
  p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
  const __m512i exponent =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(exponent));
}

// The sum and the max of the 16 lanes. (GCC 12's _mm512_reduce_* warn of an uninitialised
// operand inside them.)
inline __m128 fold_to_128(__m512 v, bool max) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  const __m256 h = max ? _mm256_max_ps(lo, hi) : _mm256_add_ps(lo, hi);
  const __m128 a = _mm256_castps256_ps128(h), b = _mm256_extractf128_ps(h, 1);
  return max ? _mm_max_ps(a, b) : _mm_add_ps(a, b);
}
inline float lanes_sum(__m512 v) {
  __m128 s = fold_to_128(v, false);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
inline float lanes_max(__m512 v) {
  __m128 s = fold_to_128(v, true);
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

// Lanes of the last of V vectors that hold tokens (< T).
inline __mmask16 tail_mask(int T, int V) {
  const int in = T - 16 * (V - 1);
  return in >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << in) - 1);
}

// acc (R, V vectors) = a (R, Dh; row stride lda) . kt (Dh, Tp = 16 V).
template <int kDh, int V, int R>
inline void rows_times_kt(__m512 (&acc)[R][V], const float* a, int lda, const float* kt) {
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int d = 0; d < kDh; ++d) {
    __m512 k[V];
    for (int v = 0; v < V; ++v) k[v] = _mm512_loadu_ps(kt + d * 16 * V + 16 * v);
    for (int r = 0; r < R; ++r) {
      const __m512 ar = _mm512_set1_ps(a[int64_t(r) * lda + d]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(ar, k[v], acc[r][v]);
    }
  }
}

// P (R, T; row stride T) = softmax(scale * q K^T) for R query rows q (row stride ldq),
// kt = K^T (Dh, 16 V) with zero padding columns.
template <int kDh, int V, int R>
void score_softmax_rows(float* P, const float* q, int ldq, const float* kt, float scale, int T) {
  __m512 acc[R][V];
  rows_times_kt<kDh, V, R>(acc, q, ldq, kt);
  const __mmask16 tail = tail_mask(T, V);
  const __m512 lowest = _mm512_set1_ps(std::numeric_limits<float>::lowest());
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int r = 0; r < R; ++r) {
    __m512 s[V];
    for (int v = 0; v < V; ++v) s[v] = _mm512_mul_ps(vscale, acc[r][v]);
    s[V - 1] = _mm512_mask_blend_ps(tail, lowest, s[V - 1]);  // padding: exp() = 0
    __m512 m = s[0];
    for (int v = 1; v < V; ++v) m = _mm512_max_ps(m, s[v]);
    const __m512 maxv = _mm512_set1_ps(lanes_max(m));
    __m512 sum = _mm512_setzero_ps();
    for (int v = 0; v < V; ++v) {
      s[v] = exp_nonpositive(_mm512_sub_ps(s[v], maxv));
      sum = _mm512_add_ps(sum, s[v]);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / lanes_sum(sum));
    float* row = P + int64_t(r) * T;
    for (int v = 0; v + 1 < V; ++v) _mm512_storeu_ps(row + 16 * v, _mm512_mul_ps(s[v], inv));
    _mm512_mask_storeu_ps(row + 16 * (V - 1), tail, _mm512_mul_ps(s[V - 1], inv));
  }
}

// ds (R, Tp = 16 V; zero padding) = scale * P * (dP - <dP, P>) with dP = dO V^T, for R rows
// of dO (row stride ldo), vt = V^T (Dh, Tp) with zero padding, P (R, T; row stride T).
template <int kDh, int V, int R>
void softmax_backward_rows(float* ds, const float* dO, int ldo, const float* vt, const float* P,
                           float scale, int T) {
  __m512 acc[R][V];
  rows_times_kt<kDh, V, R>(acc, dO, ldo, vt);
  const __mmask16 tail = tail_mask(T, V);
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int r = 0; r < R; ++r) {
    const float* pr = P + int64_t(r) * T;
    __m512 p[V];
    for (int v = 0; v + 1 < V; ++v) p[v] = _mm512_loadu_ps(pr + 16 * v);
    p[V - 1] = _mm512_maskz_loadu_ps(tail, pr + 16 * (V - 1));
    __m512 dot = _mm512_mul_ps(acc[r][0], p[0]);
    for (int v = 1; v < V; ++v) dot = _mm512_fmadd_ps(acc[r][v], p[v], dot);
    const __m512 vdot = _mm512_set1_ps(lanes_sum(dot));
    float* out = ds + int64_t(r) * 16 * V;
    for (int v = 0; v < V; ++v)
      _mm512_storeu_ps(out + 16 * v,
                       _mm512_mul_ps(_mm512_mul_ps(p[v], _mm512_sub_ps(acc[r][v], vdot)), vscale));
  }
}

}  // namespace attention_avx512
MINIVIT_ISA_END
}  // namespace minivit
#pragma GCC diagnostic pop
#endif
