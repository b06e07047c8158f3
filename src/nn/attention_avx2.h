#pragma once
// The attention core's rows with the scores held in ymm registers from the product to the
// softmax (forward) or to dS (backward), for T up to 64 tokens (at most 8 vectors of 8 a
// row) and a compiled head size: attention_avx512.h's method at the AVX2 level, whose 16
// registers hold fewer rows. The portable loops (attention_tiles.h) computed 64 score
// columns for 49 tokens, stored them with their padding, read them back for the max, the
// exps and the sum, and copied the weights out: the attention core was a third of an
// evaluation at this level. Rows whose last vector holds one or two tokens take their
// scores from the whole vectors and from the tail's, made for all rows at once
// (attention_short_tail.h drives them). Internal to src/nn (attention.cpp and
// attention_short_tail.h are the users); only in builds for AVX2 without AVX-512.
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
#include <immintrin.h>

#include <cstdint>
#include <limits>
#include "minivit/kernels/isa.h"
#include "minivit/kernels/transpose8.h"
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

// inv[r] = 1 / the sum of sum[r]'s 8 lanes, in every lane, to fold_lanes's bits: two rows
// share one fold and one division, in the two 128-bit halves of one vector (each row's
// halves added, then lanes 2 apart, then neighbours), where a fold and a division per row
// made a chain of latencies for each.
template <int R>
inline void inverse_row_sums(const __m256 (&sum)[R], __m256 (&inv)[R]) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int r = 0;
  for (; r + 2 <= R; r += 2) {
    __m256 v = _mm256_add_ps(_mm256_permute2f128_ps(sum[r], sum[r + 1], 0x20),
                             _mm256_permute2f128_ps(sum[r], sum[r + 1], 0x31));
    v = _mm256_add_ps(v, _mm256_permute_ps(v, 0x4E));
    v = _mm256_div_ps(one, _mm256_add_ps(v, _mm256_permute_ps(v, 0xB1)));
    inv[r] = _mm256_permute2f128_ps(v, v, 0x00);
    inv[r + 1] = _mm256_permute2f128_ps(v, v, 0x11);
  }
  if (r < R) inv[r] = _mm256_div_ps(one, fold_lanes<false>(sum[r]));
}

// The rows a call of the functions below takes at V vectors a row, so that its R V
// accumulators make enough independent chains of FMAs to cover their latency (about 8) and
// still leave registers for the broadcasts and the exps' constants: one row of 49 tokens
// (7 vectors) a call, four of 15 (2 vectors, the default model's kept patches). Divides 4.
constexpr int rows_per_call(int V) { return V <= 2 ? 4 : V <= 4 ? 2 : 1; }

// acc (R, V vectors) = a (R, kDh; row stride lda) . the first 8 V columns of kt (kDh, ld_kt).
// The sums run in a local array, copied to acc at the end: where the caller's array stays in
// memory (its later loops index it), the compiler stored each sum to it on every step of d.
// One vector of K^T is live at a time beside the R broadcasts, so that R V sums up to 12 fit
// the 16 registers.
template <int kDh, int V, int R>
inline void rows_times_kt(__m256 (&acc)[R][V], const float* a, int lda, const float* kt,
                          int ld_kt) {
  __m256 sum[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) sum[r][v] = _mm256_setzero_ps();
  for (int d = 0; d < kDh; ++d) {
    __m256 ad[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) ad[r] = _mm256_broadcast_ss(a + int64_t(r) * lda + d);
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      const __m256 k = _mm256_loadu_ps(kt + int64_t(d) * ld_kt + 8 * v);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) sum[r][v] = _mm256_fmadd_ps(ad[r], k, sum[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[r][v] = sum[r][v];
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
  __m256 row_sum[R], inv[R];
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
    row_sum[r] = _mm256_setzero_ps();
    for (int v = 0; v < V; ++v) {
      s[r][v] = exp_nonpositive(_mm256_sub_ps(s[r][v], row_max));
      row_sum[r] = _mm256_add_ps(row_sum[r], s[r][v]);
    }
  }
  inverse_row_sums(row_sum, inv);
  for (int r = 0; r < R; ++r) {
    float* row = P + int64_t(r) * T;
    for (int v = 0; v + 1 < V; ++v)
      _mm256_storeu_ps(row + 8 * v, _mm256_mul_ps(s[r][v], inv[r]));
    _mm256_maskstore_ps(row + 8 * (V - 1), live_last, _mm256_mul_ps(s[r][V - 1], inv[r]));
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

// The tokens in the last of a row's score vectors when they are at most kMaxShortTail and
// whole vectors come before them (T = 8 VF + 1 or 2: 17, 18, 33, 34, 49, 50 of the tokens
// attention_short_tail.h takes); else 0. At 49 tokens the 7th vector holds one live lane,
// and with it a row's 7 sums leave no registers for a second row's: one row a call read each
// vector of K^T for 7 FMAs.
constexpr int kMaxShortTail = 2;
constexpr int short_tail(int T) {
  return T > 8 && T <= 8 * kMaxVectors && T % 8 <= kMaxShortTail ? T % 8 : 0;
}

// Rows a call of score_softmax_rows_tail at VF whole vectors a row: its R VF sums and a
// broadcast within the 16 registers (two rows of 49 tokens, four of 17), R NT tail scores
// within a vector. Divides 4 (attention_tiles::kRows).
constexpr int tail_rows_per_call(int VF) { return VF <= 2 ? 4 : 2; }

// tail (NT, Tp) = scale * sums for every row of the head (< T) against each of its NT
// short-tail tokens: 8 rows a vector, their x (T, kDh; row stride ldx) turned into columns
// in registers 8 values of d at a time (lanes past T zero), which add(acc, columns, d0) adds
// into the NT sums (columns[d]: value d0 + d of the 8 rows).
template <int kDh, int NT, typename AddColumns>
[[gnu::always_inline]] inline void sum_tail_columns(float* tail, int Tp, const float* x,
                                                    int ldx, int T, float scale,
                                                    AddColumns&& add) {
  static_assert(kDh % 8 == 0, "head sizes of whole vectors");
  static_assert(NT >= 1 && NT <= kMaxShortTail);
  for (int i0 = 0; i0 < T; i0 += 8) {
    const int rows = T - i0 < 8 ? T - i0 : 8;
    __m256 acc[NT];
    for (int j = 0; j < NT; ++j) acc[j] = _mm256_setzero_ps();
    for (int d0 = 0; d0 < kDh; d0 += 8) {
      __m256 columns[8];
      for (int i = 0; i < 8; ++i)
        columns[i] = i < rows ? _mm256_loadu_ps(x + int64_t(i0 + i) * ldx + d0)
                              : _mm256_setzero_ps();
      transpose8(columns);
      add(acc, columns, d0);
    }
    for (int j = 0; j < NT; ++j)
      _mm256_storeu_ps(tail + j * Tp + i0, _mm256_mul_ps(_mm256_set1_ps(scale), acc[j]));
  }
}

// tail (NT, Tp) = scale * the scores of every row of the head (< T) against each of its NT
// short-tail tokens T - NT, ..., T - 1, for q (T, kDh; row stride ldq) and kt = K^T (kDh,
// Tp), each score summed over d in the order rows_times_kt sums it, so that it has the same
// bits. With kMaskOwn, each tail token's score against itself is the lowest float, as
// score_softmax_rows masks it.
template <int kDh, int NT, bool kMaskOwn = false>
void tail_scores(float* tail, const float* q, int ldq, const float* kt, int T, int Tp,
                 float scale) {
  const int first = T - NT;
  sum_tail_columns<kDh, NT>(tail, Tp, q, ldq, T, scale,
                            [&](__m256(&acc)[NT], const __m256(&columns)[8], int d0) {
                              for (int d = 0; d < 8; ++d)
                                for (int j = 0; j < NT; ++j)
                                  acc[j] = _mm256_fmadd_ps(
                                      _mm256_set1_ps(kt[(d0 + d) * Tp + first + j]),
                                      columns[d], acc[j]);
                            });
  if constexpr (kMaskOwn)
    for (int j = 0; j < NT; ++j) tail[j * Tp + first + j] = std::numeric_limits<float>::lowest();
}

// P (R, T; row stride T) = the softmax of R rows of scores for T = 8 VF + NT tokens, NT <=
// kMaxShortTail (short_tail), R NT <= 8: the VF whole vectors of each row in s, the NT last
// tokens' scores in `tail` (NT rows of stride Tp; element r of row j is row r's score against
// token 8 VF + j), made for the whole head at once (tail_scores, additive_tail_scores). The
// R NT tail scores share one vector (lane j R + r) for their exps. Every value rounds as
// softmax_rows rounds it over VF + 1 vectors: the sums take the tail's exps and the padding
// lanes' (each exp(-87), the clamp of exp_nonpositive) in the lanes and the order that path
// adds them. Each score of s is first taken through prepare(r, v, s[r][v]) (the dot forms'
// scale and mask), in the loop that finds the row's max. Always inlined, so that s stays in
// the registers.
template <int VF, int R, int NT, typename Prepare>
[[gnu::always_inline]] inline void softmax_rows_tail(float* P, __m256 (&s)[R][VF], int T,
                                                     const float* tail, int Tp,
                                                     Prepare&& prepare) {
  static_assert(NT >= 1 && NT <= kMaxShortTail && VF >= 1 && VF < kMaxVectors && R * NT <= 8);
  const __m256 lowest = _mm256_set1_ps(std::numeric_limits<float>::lowest());
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  auto lanes_equal = [&](int l) {
    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(lane, _mm256_set1_epi32(l)));
  };
  // Lane j R + r: row r's score against tail token j, less the row's max; built in
  // registers, as a store of lanes read back as a vector stalls the load.
  __m256 tail_s = _mm256_setzero_ps(), row_max[R];
  for (int r = 0; r < R; ++r) {
    row_max[r] = lowest;
    for (int v = 0; v < VF; ++v) {
      s[r][v] = prepare(r, v, s[r][v]);
      row_max[r] = _mm256_max_ps(row_max[r], s[r][v]);
    }
    for (int j = 0; j < NT; ++j)  // the max is exact: any order gives score_softmax_rows's
      row_max[r] = _mm256_max_ps(row_max[r], _mm256_broadcast_ss(tail + j * Tp + r));
    row_max[r] = fold_lanes<true>(row_max[r]);
    for (int j = 0; j < NT; ++j)
      tail_s = _mm256_blendv_ps(
          tail_s, _mm256_sub_ps(_mm256_broadcast_ss(tail + j * Tp + r), row_max[r]),
          lanes_equal(j * R + r));
  }
  tail_s = exp_nonpositive(tail_s);
  const __m256 padding_exp = exp_nonpositive(_mm256_set1_ps(-87.0f));
  const __m256 in_tail = _mm256_castsi256_ps(lanes_below(NT, 0));
  __m256 last[R], row_sum[R], inv[R];
  for (int r = 0; r < R; ++r) {
    row_sum[r] = _mm256_setzero_ps();
    for (int v = 0; v < VF; ++v) {
      s[r][v] = exp_nonpositive(_mm256_sub_ps(s[r][v], row_max[r]));
      row_sum[r] = _mm256_add_ps(row_sum[r], s[r][v]);
    }
    // The last vector's exps: row r's tail exps (lanes j R + r) in lanes 0 .. NT-1, then
    // padding.
    const __m256i lanes_of_row = _mm256_add_epi32(_mm256_mullo_epi32(lane, _mm256_set1_epi32(R)),
                                                  _mm256_set1_epi32(r));
    last[r] = _mm256_blendv_ps(padding_exp, _mm256_permutevar8x32_ps(tail_s, lanes_of_row),
                               in_tail);
    row_sum[r] = _mm256_add_ps(row_sum[r], last[r]);
  }
  inverse_row_sums(row_sum, inv);
  for (int r = 0; r < R; ++r) {
    float* row = P + int64_t(r) * T;
    for (int v = 0; v < VF; ++v) _mm256_storeu_ps(row + 8 * v, _mm256_mul_ps(s[r][v], inv[r]));
    const __m128 tail_p = _mm256_castps256_ps128(_mm256_mul_ps(last[r], inv[r]));
    if constexpr (NT == 1)
      _mm_store_ss(row + 8 * VF, tail_p);
    else
      _mm_storel_pi(reinterpret_cast<__m64*>(row + 8 * VF), tail_p);
  }
}

// score_softmax_rows for T = 8 VF + NT tokens (short_tail) and R rows (R NT <= 8): the VF
// whole vectors from the products, the NT last tokens' scores from `tail`, which tail_scores
// made for the whole head at once; kt = K^T (kDh, Tp). The weights round as
// score_softmax_rows rounds them (softmax_rows_tail). With kMaskOwn, row r's own token is
// diagonal + r: masked here when it lies in a whole vector, by tail_scores<..., true> when
// it lies in the tail.
template <int kDh, int VF, int R, int NT, bool kMaskOwn = false>
void score_softmax_rows_tail(float* P, const float* q, int ldq, const float* kt, float scale,
                             int T, const float* tail, int Tp, int diagonal = 0) {
  __m256 s[R][VF];
  rows_times_kt<kDh, VF, R>(s, q, ldq, kt, Tp);
  const __m256 vscale = _mm256_set1_ps(scale);
  const __m256 lowest = _mm256_set1_ps(std::numeric_limits<float>::lowest());
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  softmax_rows_tail<VF, R, NT>(P, s, T, tail, Tp, [&](int r, int v, __m256 score) {
    score = _mm256_mul_ps(vscale, score);
    if constexpr (kMaskOwn) {
      const __m256i own = _mm256_cmpeq_epi32(lane, _mm256_set1_epi32(diagonal + r - 8 * v));
      score = _mm256_blendv_ps(score, lowest, _mm256_castsi256_ps(own));
    }
    return score;
  });
}

// y = P + 1 = ea ek + 1, the denominator of an additive term of query lanes ea = e^2q
// against keys ek = e^2k (either may be the broadcast).
[[gnu::always_inline]] inline __m256 additive_denominator(__m256 ea, __m256 ek) {
  return _mm256_fmadd_ps(ea, ek, _mm256_set1_ps(1.0f));
}

// sum + v_d (P - 1) / (P + 1), as attention_tiles::additive_rows_from_exps makes a term;
// v_ea = v_d ea.
[[gnu::always_inline]] inline __m256 add_term(__m256 sum, __m256 vd, __m256 v_ea, __m256 ea,
                                              __m256 ek) {
  const __m256 numerator = _mm256_fmsub_ps(v_ea, ek, vd);
  return _mm256_add_ps(sum, _mm256_div_ps(numerator, additive_denominator(ea, ek)));
}

// sum + w0 / y0 + w1 / y1 over one division, (w0 y1 + w1 y0) / (y0 y1), y = ea ek + 1 (the
// caller keeps y0 y1 and the numerator floats: Head::additive_pairs).
[[gnu::always_inline]] inline __m256 add_pair(__m256 sum, __m256 w0, __m256 ea0, __m256 ek0,
                                              __m256 w1, __m256 ea1, __m256 ek1) {
  const __m256 y1 = additive_denominator(ea1, ek1), y0 = additive_denominator(ea0, ek0);
  const __m256 numerator = _mm256_fmadd_ps(w0, y1, _mm256_mul_ps(w1, y0));
  return _mm256_add_ps(sum, _mm256_div_ps(numerator, _mm256_mul_ps(y0, y1)));
}

// acc (R, V vectors) = R rows of additive scores from exp_q (R, kDh; row stride kDh) = e^2q
// of the query rows and the first 8 V columns of exp_kt (kDh, ld_kt) = e^2K^T, any positive
// value in its padding columns. A division a term: sum_d v_d tanh(q_rd + k_jd), each tanh
// (P - 1) / (P + 1) with P = e^2q e^2k, as attention_tiles::additive_rows_from_exps makes
// it. kInPairs: tanh = 1 - 2 / (P + 1), and the scores less the head's constant sum_d v_d,
// to which a softmax is blind: sum_d w_d / (P + 1) with w = -2 v, two terms a division
// (add_pair). On a Zen 3 the divider holds up one of the two pipes that multiply, so a
// pair's cost is its five multiplies beside the division, where the numerators v_d (P - 1)
// took two more. The sums run in a local array, as in rows_times_kt.
template <int kDh, int V, int R, bool kInPairs>
[[gnu::always_inline]] inline void additive_rows(__m256 (&acc)[R][V], const float* exp_q,
                                                 const float* exp_kt, int ld_kt,
                                                 const float* v) {
  static_assert(V >= 1 && V <= kMaxVectors && R >= 1 && kDh % 2 == 0);
  __m256 s[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < V; ++c) s[r][c] = _mm256_setzero_ps();
  auto ea = [&](int r, int d) { return exp_q[int64_t(r) * kDh + d]; };
  auto ek = [&](int d, int c) { return _mm256_loadu_ps(exp_kt + int64_t(d) * ld_kt + 8 * c); };
  for (int d = 0; d < kDh; d += kInPairs ? 2 : 1)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < V; ++c) {
        if constexpr (kInPairs)
          s[r][c] = add_pair(s[r][c], _mm256_set1_ps(-2.0f * v[d]), _mm256_set1_ps(ea(r, d)),
                             ek(d, c), _mm256_set1_ps(-2.0f * v[d + 1]),
                             _mm256_set1_ps(ea(r, d + 1)), ek(d + 1, c));
        else
          s[r][c] = add_term(s[r][c], _mm256_set1_ps(v[d]), _mm256_set1_ps(v[d] * ea(r, d)),
                             _mm256_set1_ps(ea(r, d)), ek(d, c));
      }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < V; ++c) acc[r][c] = s[r][c];
}

// P (R, T; row stride T) = the softmax of R rows of additive scores (additive_rows).
template <int kDh, int V, int R, bool kInPairs>
void additive_softmax_rows(float* P, const float* exp_q, const float* exp_kt, int ld_kt,
                           const float* v, int T) {
  __m256 s[R][V];
  additive_rows<kDh, V, R, kInPairs>(s, exp_q, exp_kt, ld_kt, v);
  softmax_rows<V, R>(P, s, T);
}

// tail (NT, Tp) = the additive scores of every row of the head (< T) against each of its NT
// short-tail tokens, as tail_scores makes the dot forms', from the rows' e^2q (exp_q, (T,
// kDh)) and exp_kt = e^2K^T (kDh, Tp). Each term and sum as additive_rows makes it, so that
// the scores have its bits (the scale 1 is exact).
template <int kDh, int NT, bool kInPairs>
void additive_tail_scores(float* tail, const float* exp_q, const float* exp_kt,
                          const float* v, int T, int Tp) {
  const int first = T - NT;
  sum_tail_columns<kDh, NT>(tail, Tp, exp_q, kDh, T, 1.0f,
                            [&](__m256(&acc)[NT], const __m256(&ea)[8], int d0) {
    // Terms d0 + d of the 8 rows against tail token j, as additive_rows sums them.
    auto ek = [&](int d, int j) { return _mm256_set1_ps(exp_kt[(d0 + d) * Tp + first + j]); };
    for (int d = 0; d < 8; d += kInPairs ? 2 : 1)
      for (int j = 0; j < NT; ++j) {
        if constexpr (kInPairs) {
          acc[j] = add_pair(acc[j], _mm256_set1_ps(-2.0f * v[d0 + d]), ea[d], ek(d, j),
                            _mm256_set1_ps(-2.0f * v[d0 + d + 1]), ea[d + 1], ek(d + 1, j));
        } else {
          const __m256 vd = _mm256_set1_ps(v[d0 + d]);
          acc[j] = add_term(acc[j], vd, _mm256_mul_ps(vd, ea[d]), ea[d], ek(d, j));
        }
      }
  });
}

// additive_softmax_rows for T = 8 VF + NT tokens (short_tail): the VF whole vectors from
// additive_rows, the NT last tokens' scores from `tail` (additive_tail_scores), the weights
// rounded as additive_softmax_rows rounds them (softmax_rows_tail).
template <int kDh, int VF, int R, int NT, bool kInPairs>
void additive_softmax_rows_tail(float* P, const float* exp_q, const float* exp_kt, int ld_kt,
                                const float* v, int T, const float* tail) {
  __m256 s[R][VF];
  additive_rows<kDh, VF, R, kInPairs>(s, exp_q, exp_kt, ld_kt, v);
  softmax_rows_tail<VF, R, NT>(P, s, T, tail, ld_kt, [](int, int, __m256 score) { return score; });
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
