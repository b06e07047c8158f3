#pragma once
// The forward of a head whose rows end in a short tail (attention_avx512.h's short_tail: 17,
// 18, 33, 34, 49 or 50 tokens) at head sizes of whole vectors: the tail tokens' scores for
// every row at once, then the rows 8 .. 5 at a time. Internal to src/nn (attention.cpp is
// the one user); only in builds for AVX-512.
#if defined(__AVX512F__)
#include <cstdint>

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

// Rows i0 .. i0+R-1 (R <= 8) of a head in registers whose rows end in a short tail of NT
// tokens after VF whole vectors (attention_avx512.h), its tail scores in w.tail; kMaskOwn
// masks each row's own token (masks_own_token).
template <int kDh, int R, int VF, int NT, bool kMaskOwn>
void forward_rows_short_tail(int i0, const Head& hd, float* out, float* att, QueryRows q,
                             const float* v, HeadScratch& w) {
  const int T = hd.T, D = hd.D;
  float* P = att + hd.att_offset + int64_t(i0) * T;
  const float* qi = q.rows + int64_t(i0) * q.ld;
  attention_avx512::score_softmax_rows_tail<kDh, VF, R, NT, kMaskOwn>(
      P, qi, q.ld, w.kt, hd.scale, T, w.tail + i0, padded_tokens(T), i0);
  rows_times_x<kDh, R>(out + int64_t(i0) * D, D, P, T, v, 3 * D, T, false);
}

// Rows a call for a head of T tokens with a short tail: a single row's call runs its sums as
// dependent chains, at about a third of the rate of a call of four, so the most rows of 8 .. 5
// that divide T, leaving none over (49 = 7 x 7 and 50 = 5 x 10 tokens: 28-pixel images in
// 4-pixel patches, without and with a CLS token); else kRows, then one at a time.
constexpr int short_tail_rows_per_call(int T) {
  for (int r = 8; r >= 5; --r)
    if (T % r == 0) return r;
  return kRows;
}

// Every row of a head of T tokens, T % 16 of them in the short tail, after its tail scores.
template <int kDh, int T, bool kMaskOwn>
void forward_rows_of_short_tail_head(const Head& hd, float* out, float* att, QueryRows q,
                                     const float* v, HeadScratch& w) {
  constexpr int NT = attention_avx512::short_tail(T), VF = T / 16;
  constexpr int R = short_tail_rows_per_call(T);
  static_assert(NT > 0, "a token count with a short tail");
  attention_avx512::tail_scores<kDh, NT, kMaskOwn>(w.tail, q.rows, q.ld, w.kt, T,
                                                   padded_tokens(T), hd.scale);
  int i = 0;
  for (; i + R <= T; i += R)
    forward_rows_short_tail<kDh, R, VF, NT, kMaskOwn>(i, hd, out, att, q, v, w);
  for (; i < T; ++i) forward_rows_short_tail<kDh, 1, VF, NT, kMaskOwn>(i, hd, out, att, q, v, w);
}

// The head's rows with its own-token mask chosen once.
template <int kDh, int T>
void forward_short_tail_head_of(const Head& hd, float* out, float* att, QueryRows q,
                                const float* v, HeadScratch& w) {
  if (masks_own_token(hd))
    forward_rows_of_short_tail_head<kDh, T, true>(hd, out, att, q, v, w);
  else
    forward_rows_of_short_tail_head<kDh, T, false>(hd, out, att, q, v, w);
}

// forward_short_tail_head_of for the token counts short_tail takes; false for others.
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
