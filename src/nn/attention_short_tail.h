#pragma once
// The forward of a head whose rows end in a short tail (short_tail of attention_avx512.h or
// attention_avx2.h: 17, 18, 33, 34, 49 or 50 tokens) at head sizes of whole vectors: the tail
// tokens' scores for every row at once, then the rows a few at a time. Internal to src/nn
// (attention.cpp is the one user); only in builds for AVX-512 or AVX2.
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <cstdint>

#include "attention_avx2.h"
#include "attention_avx512.h"
#include "attention_head.h"
#include "attention_tiles.h"
#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN
namespace attention_short_tail {

using attention_head::Head;
using attention_head::HeadScratch;
using attention_head::QueryRows;
using attention_head::masks_own_token;
using attention_tiles::kRows;
using attention_tiles::padded_tokens;
using attention_tiles::rows_times_x;

#if defined(__AVX512F__)
namespace level = attention_avx512;
constexpr int kLanes = 16;
constexpr bool kAdditiveTails = false;  // additive heads take attention_avx512's whole rows
#else
namespace level = attention_avx2;
constexpr int kLanes = 8;
constexpr bool kAdditiveTails = true;
#endif

// Rows i0 .. i0+R-1 of a head in registers whose rows end in a short tail of NT tokens
// after VF whole vectors, its tail scores in w.tail, their scores in calls of kCall rows (R
// at the AVX-512 level, level::tail_rows_per_call at AVX2's); kMaskOwn masks each row's own
// token (masks_own_token).
template <int kDh, int R, int VF, int NT, bool kMaskOwn>
void forward_rows_short_tail(int i0, const Head& hd, float* out, float* att, QueryRows q,
                             const float* v, HeadScratch& w) {
  const int T = hd.T, D = hd.D;
#if defined(__AVX512F__)
  constexpr int kCall = R;
#else
  constexpr int kCall = R < level::tail_rows_per_call(VF) ? R : level::tail_rows_per_call(VF);
#endif
  static_assert(R % kCall == 0);
  for (int step = 0; step < R; step += kCall) {
    const int r = i0 + step;
    level::score_softmax_rows_tail<kDh, VF, kCall, NT, kMaskOwn>(
        att + hd.att_offset + int64_t(r) * T, q.rows + int64_t(r) * q.ld, q.ld, w.kt, hd.scale,
        T, w.tail + r, padded_tokens(T), r);
  }
  rows_times_x<kDh, R>(out + int64_t(i0) * D, D, att + hd.att_offset + int64_t(i0) * T, T, v,
                       3 * D, T, false);
}

#if !defined(__AVX512F__)
// forward_rows_short_tail for R rows of an additive head whose exps prepare_additive took,
// in calls of the rows additive_softmax_rows takes at VF + 1 vectors.
template <int kDh, int R, int VF, int NT, bool kInPairs>
void additive_rows_short_tail(int i0, const Head& hd, float* out, float* att, const float* v,
                              HeadScratch& w) {
  const int T = hd.T, D = hd.D;
  constexpr int kCall = R < level::rows_per_call(VF + 1) ? R : level::rows_per_call(VF + 1);
  static_assert(R % kCall == 0);
  for (int step = 0; step < R; step += kCall) {
    const int r = i0 + step;
    level::additive_softmax_rows_tail<kDh, VF, kCall, NT, kInPairs>(
        att + hd.att_offset + int64_t(r) * T, w.exp_q + int64_t(r) * kDh, w.exp_kt,
        padded_tokens(T), hd.additive_v, T, w.tail + r);
  }
  rows_times_x<kDh, R>(out + int64_t(i0) * D, D, att + hd.att_offset + int64_t(i0) * T, T, v,
                       3 * D, T, false);
}

// Every row of an additive head of T tokens with a short tail, after their tail scores: at
// 49 and 50 tokens 6 vectors of 8 scores a row and the tail's, where whole rows took 7.
template <int kDh, int T, bool kInPairs>
void additive_short_tail_head(const Head& hd, float* out, float* att, const float* v,
                              HeadScratch& w) {
  constexpr int NT = level::short_tail(T), VF = T / kLanes;
  static_assert(NT > 0, "a token count with a short tail");
  level::additive_tail_scores<kDh, NT, kInPairs>(w.tail, w.exp_q, w.exp_kt, hd.additive_v, T,
                                                 padded_tokens(T));
  attention_tiles::for_row_steps<kRows>(T, true, [&](int i, auto n) {
    additive_rows_short_tail<kDh, n(), VF, NT, kInPairs>(i, hd, out, att, v, w);
  });
}
#endif

// Rows a call for a head of T tokens with a short tail. At the AVX-512 level, where a single
// row's call runs its sums as dependent chains, at about a third of the rate of a call of
// four: the most rows of 8 .. 5 that divide T, leaving none over (49 = 7 x 7 and 50 = 5 x 10
// tokens: 28-pixel images in 4-pixel patches, without and with a CLS token); else, and at
// the AVX2 level, whose registers hold fewer rows, kRows, then one at a time.
constexpr int short_tail_rows_per_call(int T) {
#if defined(__AVX512F__)
  for (int r = 8; r >= 5; --r)
    if (T % r == 0) return r;
#else
  (void)T;
#endif
  return kRows;
}

// Every row of a head of T tokens, level::short_tail(T) of them in the short tail, after
// their scores.
template <int kDh, int T, bool kMaskOwn>
void forward_rows_of_short_tail_head(const Head& hd, float* out, float* att, QueryRows q,
                                     const float* v, HeadScratch& w) {
  constexpr int NT = level::short_tail(T), VF = T / kLanes;
  constexpr int R = short_tail_rows_per_call(T);
  static_assert(NT > 0, "a token count with a short tail");
  level::tail_scores<kDh, NT, kMaskOwn>(w.tail, q.rows, q.ld, w.kt, T, padded_tokens(T),
                                        hd.scale);
  attention_tiles::for_row_steps<R>(T, true, [&](int i, auto n) {
    forward_rows_short_tail<kDh, n(), VF, NT, kMaskOwn>(i, hd, out, att, q, v, w);
  });
}

// The head's rows with its score form and own-token mask chosen once.
template <int kDh, int T>
void forward_short_tail_head_of(const Head& hd, float* out, float* att, QueryRows q,
                                const float* v, HeadScratch& w) {
#if !defined(__AVX512F__)
  if (hd.form == AttentionForm::additive)
    return with_additive_pairs(
        hd, [&](auto pairs) { additive_short_tail_head<kDh, T, pairs()>(hd, out, att, v, w); });
#endif
  if (masks_own_token(hd))
    forward_rows_of_short_tail_head<kDh, T, true>(hd, out, att, q, v, w);
  else
    forward_rows_of_short_tail_head<kDh, T, false>(hd, out, att, q, v, w);
}

// forward_short_tail_head_of for the token counts short_tail takes; false for others. An
// additive head comes here only where kAdditiveTails, with its exps taken.
template <int kDh>
bool forward_short_tail_head(const Head& hd, float* out, float* att, QueryRows q,
                             const float* v, HeadScratch& w) {
  switch (hd.T) {
    case 17: forward_short_tail_head_of<kDh, 17>(hd, out, att, q, v, w); return true;
    case 18: forward_short_tail_head_of<kDh, 18>(hd, out, att, q, v, w); return true;
    case 33: forward_short_tail_head_of<kDh, 33>(hd, out, att, q, v, w); return true;
    case 34: forward_short_tail_head_of<kDh, 34>(hd, out, att, q, v, w); return true;
    case 49: forward_short_tail_head_of<kDh, 49>(hd, out, att, q, v, w); return true;
    case 50: forward_short_tail_head_of<kDh, 50>(hd, out, att, q, v, w); return true;
    default: return false;
  }
}

}  // namespace attention_short_tail
MINIVIT_ISA_END
}  // namespace minivit
#endif
