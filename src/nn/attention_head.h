#pragma once
// One (batch, head) of the attention core as attention.cpp sees it: its description (Head),
// its thread's scratch (HeadScratch), and the score functions' own steps (the cosine form's
// normalisation, the additive form's exps and dispatch). Internal to src/nn.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "attention_avx2.h"
#include "attention_avx512.h"
#include "attention_tiles.h"
#include "minivit/nn/attention.h"
#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN
namespace attention_head {

using namespace attention_tiles;

constexpr float kNormEps = 1e-12f;                  // torch.nn.functional.normalize's
inline const float kMaxLogitScale = float(std::log(100.0));  // Swin v2's cap on the temperature

// One thread's scratch: views into its row of the caller's scratch buffer, each view
// starting on a cache line. The first five serve every form; the rest the cosine, lsa and
// additive forms.
struct HeadScratch {
  float* kt;     // (Dh, Tp) K^T, or V^T in backward; padding columns zero
  float* score;  // (max(kRows, T), Tp) rows of scores, or of dP' in backward; every row's
                 // dS where backward sums dK and dV over the whole head (whole_head_sums)
  float* used;   // (kRows, T) rows of P' = P * mask / (1 - p)
  float* dk;     // (T, Dh) dK (dkhat for cosine) for this head, added into dqkv at the end
  float* dv;     // (T, Dh) dV likewise
  float* qhat;   // (T, Dh) cosine: q / max(|q|, eps)
  float* khat;   // (T, Dh) cosine: k likewise
  float* dqhat;  // (T, Dh) cosine: the gradient at qhat; lsa: at q from the scores
  float* norms;  // (2, T) cosine: max(|q|, eps), then max(|k|, eps)
  float* keys_t; // (Dh, Tp) additive in backward: K^T while kt holds V^T
  float* dkt;    // (Dh, Tp) additive: dK transposed, added into dqkv at the end
  float* exp_q;  // (T, Dh) additive: e^2q
  float* exp_kt; // (Dh, Tp) additive in forward: e^2K^T; padding columns 1
  float* exp_k;  // (T, Dh) additive in backward: e^2K
  float* tail;   // (2, Tp) the scores against the short tail's tokens (attention_avx512.h)
};

constexpr int kScratchViews = 15;

inline int64_t whole_lines(int64_t floats) { return (floats + 15) / 16 * 16; }

// Lays out one thread's views over `row` in the order of HeadScratch, returning the floats
// they take; with views == nullptr it only counts.
inline int64_t lay_out_scratch(float* row, int T, int Dh, HeadScratch* views) {
  const int64_t Tp = padded_tokens(T), TD = int64_t(T) * Dh;
  const int64_t score_rows = std::max<int64_t>(kRows, T);
  const int64_t sizes[kScratchViews] = {Dh * Tp, score_rows * Tp, kRows * int64_t(T), TD, TD, TD,
                                        TD,      TD,              2 * int64_t(T),     Dh * Tp,
                                        Dh * Tp, TD,              Dh * Tp,            TD,
                                        2 * Tp};
  float* starts[kScratchViews];
  int64_t total = 0;
  for (int i = 0; i < kScratchViews; ++i) {
    starts[i] = row ? row + total : nullptr;
    total += whole_lines(sizes[i]);
  }
  if (views)
    *views = HeadScratch{starts[0], starts[1], starts[2], starts[3], starts[4], starts[5],
                         starts[6], starts[7], starts[8], starts[9], starts[10],
                         starts[11], starts[12], starts[13], starts[14]};
  return total;
}

// used (n) = P' = P * mask / (1 - p): the attention weights after dropout, in forward for
// the value sum and in backward for dV.
inline void apply_dropout_mask(float* __restrict used, const float* __restrict P,
                        const uint8_t* __restrict mask, int64_t n, float keep_scale) {
  for (int64_t e = 0; e < n; ++e) used[e] = mask[e] ? P[e] * keep_scale : 0.0f;
}

// One (batch, head): what its slices of the (B, T, 3D), (B, T, D) and (B, H, T, T) buffers
// and its score function need to be found and used.
struct Head {
  int T, D, Dh;
  AttentionForm form;
  float scale;        // of the dot product: 1 / sqrt(Dh), 1, or the learned temperature
  bool scale_capped;  // cosine, lsa: the temperature is at its cap, which passes no gradient
  const float* additive_v;  // (Dh) this head's vector, additive form
  bool additive_exps;       // additive: the scores from e^2q and e^2k (see prepare_additive)
  bool additive_pairs;      // additive, from exps: two terms a division (kAdditivePairBound)
  float dropout_p;
  int64_t att_offset;  // of this head's (T, T) block in att and att_mask
  int64_t mask_first_index = 0;  // added to an att element's index for its dropout draw
};

inline Head head_of(int bh, int T, int D, int H, const AttentionScore& score, float dropout_p) {
  const int Dh = D / H, h = bh % H;
  Head hd{T, D, Dh, score.form, 1.0f, false, nullptr, false, false, dropout_p,
          int64_t(bh) * T * T};
  switch (score.form) {
    case AttentionForm::scaled_dot: hd.scale = 1.0f / std::sqrt(float(Dh)); break;
    case AttentionForm::dot: break;
    case AttentionForm::cosine:
    case AttentionForm::lsa:
      hd.scale_capped = score.logit_scale[h] >= kMaxLogitScale;
      hd.scale = std::exp(std::min(score.logit_scale[h], kMaxLogitScale));
      break;
    case AttentionForm::additive: hd.additive_v = score.additive_v + int64_t(h) * Dh; break;
  }
  return hd;
}

// Whether a row's score against its own token is masked: the lsa form's, where a head has
// other tokens to attend to (with one token the row is its own, as in PyTorch's softmax of
// a single masked score).
inline bool masks_own_token(const Head& hd) { return hd.form == AttentionForm::lsa && hd.T > 1; }

// run(pairs), pairs a std::bool_constant of hd.additive_pairs: the additive kernels take
// their pairing of terms as a template argument.
template <class Run>
void with_additive_pairs(const Head& hd, Run&& run) {
  if (hd.additive_pairs)
    run(std::true_type{});
  else
    run(std::false_type{});
}

// The largest |x| of x (T, kDh; row stride ld), an inf if there is one. A NaN may pass
// unseen: it makes NaN scores by either path. One running max per column: a max across the
// vector per row made the check cost as much as the exps.
template <int kDh>
float largest_magnitude(const float* __restrict x, int ld, int T) {
  float column_max[kDh] = {};
  for (int j = 0; j < T; ++j)
#pragma omp simd
    for (int d = 0; d < kDh; ++d)
      column_max[d] = std::max(column_max[d], std::abs(x[int64_t(j) * ld + d]));
  float largest = 0.0f;
  for (int d = 0; d < kDh; ++d) largest = std::max(largest, column_max[d]);
  return largest;
}

// ex (T, kDh) = e^2x for x (T, kDh; row stride ldx).
template <int kDh>
void exps_of_twice(float* __restrict ex, const float* __restrict x, int ldx, int T) {
  for (int j = 0; j < T; ++j)
#pragma omp simd
    for (int d = 0; d < kDh; ++d)
      ex[int64_t(j) * kDh + d] = exp_within_87(2.0f * x[int64_t(j) * ldx + d]);
}

// At the AVX2 and AVX-512 levels two additive terms share a division in registers
// (attention_avx2.h, attention_avx512.h), where the divider held up the FMAs beside it,
// while |q|max + |k|max <= kAdditivePairBound and |v| <= kAdditivePairWeightBound: then y =
// P + 1 <= 1 + e^40, y0 y1 <= 5.5e34, and the numerator w0 y1 + w1 y0, with |w| = 2 |v|,
// stays below 1e21, a float. At the x86-64 level a division a term: its loops took 1.08x
// the time in pairs.
#if defined(__AVX2__) && defined(__FMA__)
constexpr bool kAdditiveInPairs = true;
#else
constexpr bool kAdditiveInPairs = false;
#endif
constexpr float kAdditivePairBound = 20.0f, kAdditivePairWeightBound = 1000.0f;

// An additive head's exps, if its head size is compiled for and its q and k (T, Dh; row
// stride ld) are within kAdditiveExpBound: w.exp_q = e^2q, and w.exp_kt = e^2K^T (forward;
// its padding columns keep the 1 for_each_head put there) or w.exp_k = e^2K (backward).
// Sets hd.additive_exps to whether they were taken, and hd.additive_pairs. Element by
// element, transposing on the way, the check and the exps took 7% of a training step; in
// vectors along rows, 2%.
template <int kDh>
void prepare_additive(Head& hd, const float* q, const float* k, int ld, bool forward,
                      HeadScratch& w) {
  if constexpr (kDh > 0) {
    const int T = hd.T, Tp = padded_tokens(T);
    const float q_max = largest_magnitude<kDh>(q, ld, T), k_max = largest_magnitude<kDh>(k, ld, T);
    hd.additive_exps = std::max(q_max, k_max) <= kAdditiveExpBound;
    if (!hd.additive_exps) return;
    if constexpr (kAdditiveInPairs) {
      float v_max = 0.0f;
      for (int d = 0; d < kDh; ++d) v_max = std::max(v_max, std::abs(hd.additive_v[d]));
      hd.additive_pairs =
          q_max + k_max <= kAdditivePairBound && v_max <= kAdditivePairWeightBound;
    }
    exps_of_twice<kDh>(w.exp_q, q, ld, T);
    if (forward) {
      transpose_head<kDh>(w.exp_kt, k, ld, T, kDh);
      for (int d = 0; d < kDh; ++d) {
        float* row = w.exp_kt + int64_t(d) * Tp;
#pragma omp simd
        for (int j = 0; j < T; ++j) row[j] = exp_within_87(2.0f * row[j]);
      }
    } else {
      exps_of_twice<kDh>(w.exp_k, k, ld, T);
    }
  }
}

// xhat (T, Dh) = x / max(|x|, eps) row by row, for x (T, Dh; row stride ld); the divisors
// go to norms (T).
inline void normalise_rows(float* __restrict xhat, float* __restrict norms, const float* __restrict x,
                    int ld, int T, int Dh) {
  for (int j = 0; j < T; ++j) {
    const float* xj = x + int64_t(j) * ld;
    float sum = 0.0f;
    for (int d = 0; d < Dh; ++d) sum += xj[d] * xj[d];
    const float norm = std::max(std::sqrt(sum), kNormEps);
    norms[j] = norm;
    for (int d = 0; d < Dh; ++d) xhat[int64_t(j) * Dh + d] = xj[d] / norm;
  }
}

// x (T, Dh; row stride ld) = 0: a head's columns of q, k or v in a (T, 3D) matrix.
inline void zero_head_columns(float* x, int ld, int T, int Dh) {
  for (int j = 0; j < T; ++j) std::fill_n(x + int64_t(j) * ld, Dh, 0.0f);
}

// x (T, Dh; row stride ld) = src (T, Dh), a head's own scratch, row by row. The two never
// overlap, and saying so lets each row move as whole vectors (one at Dh = 16): left to check
// at run time, GCC's AVX-512 build took its one-float-at-a-time path: about half of the
// head backward's own samples on a Zen 5. A head size of whole runs of 8 moves as copies of
// a fixed 32 bytes, which GCC makes moves in registers: the loop over d became a call of
// memmove a row in the AVX2 build, two calls per token of a 16-wide head's backward.
template <int kDh>
inline void copy_into_head_columns(float* __restrict x, int ld, const float* __restrict src,
                                   int T, int Dh) {
  if constexpr (kDh > 0) Dh = kDh;
  for (int j = 0; j < T; ++j) {
    float* __restrict row = x + int64_t(j) * ld;
    const float* __restrict from = src + int64_t(j) * Dh;
    if constexpr (kDh > 0 && kDh % 8 == 0) {
#pragma GCC unroll 8
      for (int d = 0; d < kDh; d += 8) std::memcpy(row + d, from + d, 8 * sizeof(float));
    } else {
#pragma omp simd
      for (int d = 0; d < Dh; ++d) row[d] = from[d];
    }
  }
}

// sum_j x_j . y_j for x (T, Dh; row stride ldx) and y (T, Dh): the cosine and lsa forms'
// temperature gradient, in kSumLanes running sums, element d of a row into sum d mod
// kSumLanes, then those in order. One running sum was a chain of T Dh dependent additions:
// an eighth (cosine) to a sixth (lsa) of a 14- or 16-token head's backward on a Zen 3.
constexpr int kSumLanes = 8;
template <int kDh>
inline float sum_of_row_products(const float* __restrict x, int ldx, const float* __restrict y,
                                 int T, int Dh) {
  if constexpr (kDh > 0) Dh = kDh;
  const int whole = Dh / kSumLanes * kSumLanes;
  float lanes[kSumLanes] = {};
  for (int j = 0; j < T; ++j) {
    const float* xj = x + int64_t(j) * ldx;
    const float* yj = y + int64_t(j) * Dh;
    for (int d0 = 0; d0 < whole; d0 += kSumLanes)
#pragma omp simd
      for (int l = 0; l < kSumLanes; ++l) lanes[l] += xj[d0 + l] * yj[d0 + l];
    for (int d = whole; d < Dh; ++d) lanes[d - whole] += xj[d] * yj[d];
  }
  float sum = 0.0f;
  for (int l = 0; l < kSumLanes; ++l) sum += lanes[l];
  return sum;
}

// dx (T, Dh; row stride ld) += the gradient at x of xhat = x / max(|x|, eps), given dxhat:
// (dxhat - xhat (xhat . dxhat)) / |x|, or dxhat / eps where the floor is in force.
inline void add_through_normalisation(float* __restrict dx, int ld, const float* __restrict dxhat,
                               const float* __restrict xhat, const float* __restrict norms,
                               int T, int Dh) {
  for (int j = 0; j < T; ++j) {
    const float* g = dxhat + int64_t(j) * Dh;
    const float* y = xhat + int64_t(j) * Dh;
    float* out = dx + int64_t(j) * ld;
    const bool floored = norms[j] <= kNormEps;
    float along = 0.0f;
    for (int d = 0; d < Dh; ++d) along += y[d] * g[d];
    if (floored) along = 0.0f;
    for (int d = 0; d < Dh; ++d) out[d] += (g[d] - y[d] * along) / norms[j];
  }
}

// The head's query rows as the score function reads them: q in qkv, or qhat.
struct QueryRows {
  const float* rows;
  int ld;
};

// Whether rows of this head take the register-resident path (attention_avx512.h or
// attention_avx2.h by the build's level): a compiled head size, at most 64 tokens, a
// dot-product score or additive scores from exps (prepare_additive, which runs first), no
// attention dropout (whose masks the portable path applies).
template <int kDh>
bool in_registers(const Head& hd) {
#if defined(__AVX512F__)
  return kDh > 0 && padded_tokens(hd.T) <= 16 * attention_avx512::kMaxVectors &&
         (hd.form != AttentionForm::additive || hd.additive_exps) && hd.dropout_p == 0.0f;
#elif defined(__AVX2__) && defined(__FMA__)
  return kDh > 0 && hd.T <= 8 * attention_avx2::kMaxVectors &&
         (hd.form != AttentionForm::additive || hd.additive_exps) && hd.dropout_p == 0.0f;
#else
  (void)hd;
  return false;
#endif
}

// Calls run(V) with V = Tp / 16 a std::integral_constant, for Tp <= 64.
template <typename Run>
void dispatch_vectors(int Tp, Run&& run) {
  switch (Tp / kTile) {
    case 1: return run(std::integral_constant<int, 1>{});
    case 2: return run(std::integral_constant<int, 2>{});
    case 3: return run(std::integral_constant<int, 3>{});
    default: return run(std::integral_constant<int, 4>{});
  }
}

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
// Calls run(V) with V = attention_avx2::vectors_of(T) a std::integral_constant, for T <= 64.
template <typename Run>
void dispatch_vectors_of_8(int T, Run&& run) {
  switch (attention_avx2::vectors_of(T)) {
    case 1: return run(std::integral_constant<int, 1>{});
    case 2: return run(std::integral_constant<int, 2>{});
    case 3: return run(std::integral_constant<int, 3>{});
    case 4: return run(std::integral_constant<int, 4>{});
    case 5: return run(std::integral_constant<int, 5>{});
    case 6: return run(std::integral_constant<int, 6>{});
    case 7: return run(std::integral_constant<int, 7>{});
    default: return run(std::integral_constant<int, 8>{});
  }
}
#endif

// w.score (R, Tp) = the scores of rows i0 .. i0+R-1, qi their query rows.
template <int kDh, int R>
void score_rows(int i0, const Head& hd, const float* qi, int ldq, HeadScratch& w) {
  const int Dh = kDh ? kDh : hd.Dh, Tp = padded_tokens(hd.T);
  if (hd.form != AttentionForm::additive)
    return rows_times_kt<kDh, R>(w.score, qi, ldq, w.kt, hd.scale, Tp, Dh);
  if constexpr (kDh > 0) {
    if (hd.additive_exps)
      return additive_rows_from_exps<kDh, R>(w.score, w.exp_q + int64_t(i0) * Dh, w.exp_kt,
                                             hd.additive_v, Tp);
  }
  additive_rows<kDh, R>(w.score, qi, ldq, w.kt, hd.additive_v, Tp, Dh);
}

// dq rows i0 .. i0+R-1 (row stride 3D), w.dk or w.dkt and dscore (Dh) += dS (R, Tp; zero in
// the padding) through an additive head's scores.
template <int kDh, int R>
void additive_backward_rows(int i0, const Head& hd, float* dq, const float* ds, const float* qi,
                            int ldq, float* dscore, HeadScratch& w) {
  const int T = hd.T, D = hd.D, Dh = kDh ? kDh : hd.Dh, Tp = padded_tokens(T);
  if constexpr (kDh > 0) {
    if (hd.additive_exps)
      return additive_rows_backward_from_exps<kDh, R>(dq, 3 * D, w.dk, dscore, ds,
                                                      w.exp_q + int64_t(i0) * Dh, w.exp_k,
                                                      hd.additive_v, T, Tp);
  }
  additive_rows_backward<kDh, R>(dq, 3 * D, w.dkt, dscore, ds, qi, ldq, w.keys_t, hd.additive_v,
                                 Tp, Dh);
}

}  // namespace attention_head
MINIVIT_ISA_END
}  // namespace minivit
