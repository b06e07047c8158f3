#pragma once
// The attention core's rows with the scores held in zmm registers from the product to the
// softmax (forward) or to dS (backward), for T up to 64 tokens (at most 4 vectors a row)
// and a compiled head size. The portable loops of attention_tiles.h wrote each score row
// out, then read it back for the max, the exp and the sum: the reads stalled on the stores
// they followed (partly scalar padding stores), and the compiler summed the 16 lanes one by
// one through the stack: together 12% of a training step's samples. Internal to src/nn
// (attention.cpp is the one user); only in builds for AVX-512.
#if defined(__AVX512F__)
#include <immintrin.h>

#include <cstdint>
#include <limits>
#include "minivit/kernels/isa.h"
#include "minivit/kernels/vecmath.h"
#include "minivit/kernels/transpose16.h"

MINIVIT_INTRINSICS_BEGIN

namespace minivit {
MINIVIT_ISA_BEGIN
namespace attention_avx512 {

constexpr int kMaxVectors = 4;  // 64 tokens

// exp(x) for x <= 0 lane by lane, by exp_nonpositive's steps (vecmath.h).
inline __m512 exp_nonpositive(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  using namespace expf_steps;
  const __m512 round_magic = _mm512_set1_ps(kRoundMagic);
  const __m512 n =
      _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(kLog2e), round_magic), round_magic);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2High), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(kLn2Low), r);
  __m512 p = _mm512_set1_ps(kPolynomial[0]);
  for (int i = 1; i < kTerms; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kPolynomial[i]));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r);
  p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
  // p 2^n in one instruction where the scalar steps build 2^n in the exponent bits (a
  // conversion, an integer add and shift) and multiply: both scale exactly, to the same bits.
  return _mm512_scalef_ps(p, n);
}

// The sums (kMax: the maxima) of the 16 lanes of R <= 4 vectors at once: quarter r of the
// result holds row r's in each of its 4 lanes. One tree of shuffles serves the rows together,
// and one vector division then serves their sums, where a tree and a scalar division per row
// made a chain of latencies for each. The tree is the usual one, the same for every row: the
// 256-bit halves, the 128-bit quarters, lanes 2 apart, neighbours.
template <bool kMax, int R>
inline __m512 fold_lanes(const __m512 (&v)[R]) {
  static_assert(R >= 1 && R <= 4, "at most four rows");
  auto op = [](__m512 a, __m512 b) { return kMax ? _mm512_max_ps(a, b) : _mm512_add_ps(a, b); };
  __m512 w[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                 _mm512_setzero_ps()};
  for (int r = 0; r < R; ++r) w[r] = v[r];
  const __m512 x01 = op(_mm512_shuffle_f32x4(w[0], w[1], 0x44), _mm512_shuffle_f32x4(w[0], w[1], 0xEE));
  const __m512 x23 = op(_mm512_shuffle_f32x4(w[2], w[3], 0x44), _mm512_shuffle_f32x4(w[2], w[3], 0xEE));
  const __m512 y = op(_mm512_shuffle_f32x4(x01, x23, 0x88), _mm512_shuffle_f32x4(x01, x23, 0xDD));
  const __m512 z = op(y, _mm512_permute_ps(y, 0x4E));
  return op(z, _mm512_permute_ps(z, 0xB1));
}

// Row r's value of fold_lanes in all 16 lanes.
inline __m512 row_of_fold(__m512 folded, int r) {
  return _mm512_permutexvar_ps(_mm512_set1_epi32(4 * r), folded);
}

// Lanes of the last of V vectors that hold tokens (< T).
inline __mmask16 tail_mask(int T, int V) {
  const int in = T - 16 * (V - 1);
  return in >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << in) - 1);
}

// acc (R, V vectors) = a (R, Dh; row stride lda) . the first 16 V columns of kt (Dh, Tp =
// kVectorsInRow x 16).
template <int kDh, int V, int R, int kVectorsInRow = V>
inline void rows_times_kt(__m512 (&acc)[R][V], const float* a, int lda, const float* kt) {
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int d = 0; d < kDh; ++d) {
    __m512 k[V];
    for (int v = 0; v < V; ++v) k[v] = _mm512_loadu_ps(kt + d * 16 * kVectorsInRow + 16 * v);
    for (int r = 0; r < R; ++r) {
      const __m512 ar = _mm512_set1_ps(a[int64_t(r) * lda + d]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(ar, k[v], acc[r][v]);
    }
  }
}

// P (R, T; row stride T) = the softmax of each row of scores s (R, V vectors), whose lanes
// past T are padding. Always inlined: GCC called it, passing s through memory.
template <int V, int R>
[[gnu::always_inline]] inline void softmax_rows(float* P, __m512 (&s)[R][V], int T) {
  const __mmask16 tail = tail_mask(T, V);
  const __m512 lowest = _mm512_set1_ps(std::numeric_limits<float>::lowest());
  __m512 row_max[R], row_sum[R];
  for (int r = 0; r < R; ++r) {
    s[r][V - 1] = _mm512_mask_blend_ps(tail, lowest, s[r][V - 1]);  // padding: exp() = 0
    row_max[r] = s[r][0];
    for (int v = 1; v < V; ++v) row_max[r] = _mm512_max_ps(row_max[r], s[r][v]);
  }
  const __m512 maxes = fold_lanes<true>(row_max);
  for (int r = 0; r < R; ++r) {
    const __m512 maxv = row_of_fold(maxes, r);
    row_sum[r] = _mm512_setzero_ps();
    for (int v = 0; v < V; ++v) {
      s[r][v] = exp_nonpositive(_mm512_sub_ps(s[r][v], maxv));
      row_sum[r] = _mm512_add_ps(row_sum[r], s[r][v]);
    }
  }
  const __m512 inverses = _mm512_div_ps(_mm512_set1_ps(1.0f), fold_lanes<false>(row_sum));
  for (int r = 0; r < R; ++r) {
    const __m512 inv = row_of_fold(inverses, r);
    float* row = P + int64_t(r) * T;
    for (int v = 0; v + 1 < V; ++v) _mm512_storeu_ps(row + 16 * v, _mm512_mul_ps(s[r][v], inv));
    _mm512_mask_storeu_ps(row + 16 * (V - 1), tail, _mm512_mul_ps(s[r][V - 1], inv));
  }
}

// The lowest float in place of a row's score against its own token, in the lane of token
// `own` among V vectors of scores; nothing when own lies past them. A lane chosen by mask:
// an index would spill the scores out of the registers.
template <int V>
inline void mask_own_token(__m512 (&scores)[V], int own) {
  const __m512 lowest = _mm512_set1_ps(std::numeric_limits<float>::lowest());
  for (int v = 0; v < V; ++v)
    scores[v] = _mm512_mask_mov_ps(
        scores[v], own / 16 == v ? __mmask16(1u << (own % 16)) : __mmask16(0), lowest);
}

// P (R, T; row stride T) = softmax(scale * q K^T) for R query rows q (row stride ldq),
// kt = K^T (Dh, 16 V) with zero padding columns. With kMaskOwn, the score of row r against
// token diagonal + r (the row's own token, for locality self-attention) is the lowest float
// first, which the softmax weighs as the padding. A template flag: with a run-time test the
// unmasked rows' share of a CIFAR-10 step's samples rose from 4.9% to 6.0%.
template <int kDh, int V, int R, bool kMaskOwn = false>
void score_softmax_rows(float* P, const float* q, int ldq, const float* kt, float scale, int T,
                        int diagonal = 0) {
  __m512 acc[R][V];
  rows_times_kt<kDh, V, R>(acc, q, ldq, kt);
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_mul_ps(vscale, acc[r][v]);
  if constexpr (kMaskOwn)
    for (int r = 0; r < R; ++r) mask_own_token<V>(acc[r], diagonal + r);
  softmax_rows<V, R>(P, acc, T);
}

// y = P + 1 = ea ek + 1, the denominator of an additive term of query lanes ea = e^2q
// against keys ek = e^2k (either may be the broadcast).
[[gnu::always_inline]] inline __m512 additive_denominator(__m512 ea, __m512 ek) {
  return _mm512_fmadd_ps(ea, ek, _mm512_set1_ps(1.0f));
}

// sum + w0 / y0 + w1 / y1 over one division, (w0 y1 + w1 y0) / (y0 y1), y = ea ek + 1 (the
// caller keeps y0 y1 and the numerator floats: Head::additive_pairs).
[[gnu::always_inline]] inline __m512 add_pair(__m512 sum, __m512 w0, __m512 ea0, __m512 ek0,
                                              __m512 w1, __m512 ea1, __m512 ek1) {
  const __m512 y1 = additive_denominator(ea1, ek1), y0 = additive_denominator(ea0, ek0);
  const __m512 numerator = _mm512_fmadd_ps(w0, y1, _mm512_mul_ps(w1, y0));
  return _mm512_add_ps(sum, _mm512_div_ps(numerator, _mm512_mul_ps(y0, y1)));
}

// P (R, T; row stride T) = the softmax of R rows of additive scores, sum_d v_d tanh(q_rd +
// k_jd), from exp_q (R, kDh; row stride kDh) = e^2q of the query rows and exp_kt (kDh, 16 V)
// = e^2K^T, any positive value in its padding columns: each term (v_d P - v_d) / (P + 1)
// with P = e^2q e^2k, as attention_tiles::additive_rows_from_exps computes it. kInPairs:
// tanh = 1 - 2 / (P + 1), and the scores less the head's constant sum_d v_d, to which a
// softmax is blind: sum_d w_d / (P + 1) with w = -2 v, two terms a division (add_pair), as
// at the AVX2 level.
template <int kDh, int V, int R, bool kInPairs>
void additive_softmax_rows(float* P, const float* exp_q, const float* exp_kt, const float* v,
                           int T) {
  static_assert(kDh % 2 == 0);
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < V; ++c) acc[r][c] = _mm512_setzero_ps();
  auto ek = [&](int d, int c) { return _mm512_loadu_ps(exp_kt + d * 16 * V + 16 * c); };
  auto ea = [&](int r, int d) { return exp_q[int64_t(r) * kDh + d]; };
  if constexpr (kInPairs) {
    for (int d = 0; d < kDh; d += 2) {
      const __m512 w0 = _mm512_set1_ps(-2.0f * v[d]), w1 = _mm512_set1_ps(-2.0f * v[d + 1]);
      for (int r = 0; r < R; ++r) {
        const __m512 ea0 = _mm512_set1_ps(ea(r, d)), ea1 = _mm512_set1_ps(ea(r, d + 1));
        for (int c = 0; c < V; ++c)
          acc[r][c] = add_pair(acc[r][c], w0, ea0, ek(d, c), w1, ea1, ek(d + 1, c));
      }
    }
  } else {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int d = 0; d < kDh; ++d) {
      const __m512 vd = _mm512_set1_ps(v[d]);
      for (int r = 0; r < R; ++r) {
        const __m512 vea = _mm512_set1_ps(v[d] * ea(r, d)), eav = _mm512_set1_ps(ea(r, d));
        for (int c = 0; c < V; ++c)
          acc[r][c] = _mm512_add_ps(acc[r][c], _mm512_div_ps(_mm512_fmsub_ps(vea, ek(d, c), vd),
                                                             _mm512_fmadd_ps(eav, ek(d, c), one)));
      }
    }
  }
  softmax_rows<V, R>(P, acc, T);
}

// The tokens in the last of a row's score vectors when they are at most kMaxShortTail and
// whole vectors come before them (T = 17, 18, 33, 34, 49, 50); else 0. At 49 tokens the last
// vector holds one live lane, yet its products and exps were a quarter of the rows' work.
// attention.cpp takes this path at head sizes of whole vectors.
constexpr int kMaxShortTail = 2;
constexpr int short_tail(int T) {
  return T > 16 && T <= 16 * kMaxVectors && T % 16 <= kMaxShortTail ? T % 16 : 0;
}

// tail (NT, Tp) = scale * the scores of every row of the head (< T) against each of its NT
// short-tail tokens T - NT, ..., T - 1, for q (T, kDh; row stride ldq) and kt = K^T (kDh,
// Tp): 16 rows a vector, turned into columns in registers, each score summed over d in the
// order rows_times_kt sums it, so that it has the same bits. With kMaskOwn, each tail
// token's score against itself is the lowest float, as score_softmax_rows masks it.
template <int kDh, int NT, bool kMaskOwn = false>
void tail_scores(float* tail, const float* q, int ldq, const float* kt, int T, int Tp,
                 float scale) {
  static_assert(kDh % 16 == 0, "head sizes of whole vectors");
  static_assert(NT >= 1 && NT <= kMaxShortTail);
  const int first = T - NT;
  for (int i0 = 0; i0 < T; i0 += 16) {
    const int rows = T - i0 < 16 ? T - i0 : 16;
    __m512 acc[NT];
    for (int j = 0; j < NT; ++j) acc[j] = _mm512_setzero_ps();
    for (int d0 = 0; d0 < kDh; d0 += 16) {
      __m512 columns[16];
      for (int i = 0; i < 16; ++i)
        columns[i] = i < rows ? _mm512_loadu_ps(q + int64_t(i0 + i) * ldq + d0)
                              : _mm512_setzero_ps();
      transpose16(columns);
      for (int d = 0; d < 16; ++d)
        for (int j = 0; j < NT; ++j)
          acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(kt[(d0 + d) * Tp + first + j]), columns[d],
                                   acc[j]);
    }
    for (int j = 0; j < NT; ++j)
      _mm512_storeu_ps(tail + j * Tp + i0, _mm512_mul_ps(_mm512_set1_ps(scale), acc[j]));
  }
  if constexpr (kMaskOwn)
    for (int j = 0; j < NT; ++j) tail[j * Tp + first + j] = std::numeric_limits<float>::lowest();
}

// fold_lanes for R <= 8 rows: folded[q] holds rows 4q .. 4q+3 as fold_lanes lays them out.
template <bool kMax, int R>
inline void fold_quads(const __m512 (&v)[R], __m512 (&folded)[(R + 3) / 4]) {
  for (int q = 0; q < (R + 3) / 4; ++q) {
    __m512 quad[4];
    for (int r = 0; r < 4; ++r) quad[r] = 4 * q + r < R ? v[4 * q + r] : _mm512_setzero_ps();
    folded[q] = fold_lanes<kMax, 4>(quad);
  }
}

// score_softmax_rows for T = 16 VF + NT tokens, NT <= kMaxShortTail (short_tail), and up to
// 8 rows: the VF whole vectors from the products, and the NT last tokens' scores from `tail`
// (NT rows of stride ld_tail; element r of row j is query row r's score against token
// 16 VF + j), which tail_scores made for the whole head at once. The tail scores, their
// maxima, exps and sums live in fold_quads's layout. Every value rounds as
// score_softmax_rows rounds it: the sums take the tail's exps and the padding lanes' (each
// exp(-87), the clamp of exp_nonpositive) in the lanes and the order that path adds them.
// With kMaskOwn, row r's own token is diagonal + r: masked here when it lies in a whole
// vector, by tail_scores<..., true> when it lies in the tail.
template <int kDh, int VF, int R, int NT, bool kMaskOwn = false>
void score_softmax_rows_tail(float* P, const float* q, int ldq, const float* kt, float scale,
                             int T, const float* tail, int ld_tail, int diagonal = 0) {
  static_assert(NT >= 1 && NT <= kMaxShortTail && VF >= 1 && VF < kMaxVectors && R <= 8);
  constexpr int Q = (R + 3) / 4;  // quads of rows
  __m512 acc[R][VF];
  rows_times_kt<kDh, VF, R, VF + 1>(acc, q, ldq, kt);
  const __m512 vscale = _mm512_set1_ps(scale);
  const __m512i to_quarters = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  __m512 s[R][VF], row_max[R], row_sum[R], tail_s[NT][Q], maxes[Q], inverses[Q];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < VF; ++v) s[r][v] = _mm512_mul_ps(vscale, acc[r][v]);
    if constexpr (kMaskOwn) mask_own_token<VF>(s[r], diagonal + r);
    row_max[r] = s[r][0];
    for (int v = 1; v < VF; ++v) row_max[r] = _mm512_max_ps(row_max[r], s[r][v]);
  }
  fold_quads<true>(row_max, maxes);
  for (int j = 0; j < NT; ++j)
    for (int c = 0; c < Q; ++c) {
      const int rows = R - 4 * c < 4 ? R - 4 * c : 4;
      tail_s[j][c] = _mm512_permutexvar_ps(
          to_quarters,
          _mm512_maskz_loadu_ps(__mmask16((1u << rows) - 1), tail + j * ld_tail + 4 * c));
      maxes[c] = _mm512_max_ps(maxes[c], tail_s[j][c]);
    }
  for (int j = 0; j < NT; ++j)
    for (int c = 0; c < Q; ++c)
      tail_s[j][c] = exp_nonpositive(_mm512_sub_ps(tail_s[j][c], maxes[c]));
  const __m512 padding_exp = exp_nonpositive(_mm512_set1_ps(-87.0f));
  for (int r = 0; r < R; ++r) {
    const __m512 maxv = row_of_fold(maxes[r / 4], r % 4);
    row_sum[r] = _mm512_setzero_ps();
    for (int v = 0; v < VF; ++v) {
      s[r][v] = exp_nonpositive(_mm512_sub_ps(s[r][v], maxv));
      row_sum[r] = _mm512_add_ps(row_sum[r], s[r][v]);
    }
    __m512 last = padding_exp;  // the last vector's exps: the tail's lanes, then padding
    for (int j = 0; j < NT; ++j)
      last = _mm512_mask_mov_ps(last, __mmask16(1u << j), row_of_fold(tail_s[j][r / 4], r % 4));
    row_sum[r] = _mm512_add_ps(row_sum[r], last);
  }
  fold_quads<false>(row_sum, inverses);
  for (int c = 0; c < Q; ++c) inverses[c] = _mm512_div_ps(_mm512_set1_ps(1.0f), inverses[c]);
  float tail_p[NT][16 * Q];
  for (int j = 0; j < NT; ++j)
    for (int c = 0; c < Q; ++c)
      _mm512_storeu_ps(tail_p[j] + 16 * c, _mm512_mul_ps(tail_s[j][c], inverses[c]));
  for (int r = 0; r < R; ++r) {
    const __m512 inv = row_of_fold(inverses[r / 4], r % 4);
    float* row = P + int64_t(r) * T;
    for (int v = 0; v < VF; ++v) _mm512_storeu_ps(row + 16 * v, _mm512_mul_ps(s[r][v], inv));
    for (int j = 0; j < NT; ++j) row[16 * VF + j] = tail_p[j][16 * (r / 4) + 4 * (r % 4)];
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
  // P's rows are read twice, from L1, rather than held beside acc in the registers.
  auto load_p = [&](int r, int v) {
    const float* pr = P + int64_t(r) * T + 16 * v;
    return v + 1 < V ? _mm512_loadu_ps(pr) : _mm512_maskz_loadu_ps(tail, pr);
  };
  __m512 dot[R];
  for (int r = 0; r < R; ++r) {
    dot[r] = _mm512_mul_ps(acc[r][0], load_p(r, 0));
    for (int v = 1; v < V; ++v) dot[r] = _mm512_fmadd_ps(acc[r][v], load_p(r, v), dot[r]);
  }
  const __m512 dots = fold_lanes<false>(dot);
  for (int r = 0; r < R; ++r) {
    const __m512 vdot = row_of_fold(dots, r);
    float* out = ds + int64_t(r) * 16 * V;
    for (int v = 0; v < V; ++v)
      _mm512_storeu_ps(out + 16 * v, _mm512_mul_ps(_mm512_mul_ps(load_p(r, v), _mm512_sub_ps(acc[r][v], vdot)), vscale));
  }
}

}  // namespace attention_avx512
MINIVIT_ISA_END
}  // namespace minivit
MINIVIT_INTRINSICS_END
#endif
