#include "minivit/nn/attention.h"

#include <omp.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <cmath>
#include <limits>
#include <type_traits>

#include "attention_avx512.h"
#include "attention_head.h"
#include "attention_short_tail.h"
#include "attention_tiles.h"
#include "minivit/nn/dropout.h"

namespace minivit {
MINIVIT_ISA_BEGIN

// Each (batch, head) is a handful of (T, Dh) x (Dh, T) products with T around 50 and Dh
// around 16: too small for BLAS, whose per-call packing costs more than the arithmetic
// (through gemm the attention core took 31% of a training step for 16% of its FLOPs; in
// the loops below, 21%). One thread runs a whole (batch, head), kRows query rows at a time,
// with everything it touches in L1:
//   forward   e_i = scores(q_i, K), softmax, o_i = P'_i V
//   backward  dP'_i = dO_i V^T, dV += P'_i^T dO_i, dS_i = P_i (dP_i - <dP_i, P_i>), then
//             dS back through the score function into dq_i, dK and its parameters
// The score functions:
//   dot, scaled_dot  e_ij = scale * q_i . k_j;          dq_i = scale dS_i K, dK += scale dS_i^T q_i
//   cosine           e_ij = s * qhat_i . khat_j, xhat = x / max(|x|, eps), s = exp(min(l, ln 100));
//                    the dot form on qhat, khat, then through the normalisation, and
//                    dl = sum_i qhat_i . dqhat_i while s is below its cap
//   additive         e_ij = sum_d v_d tanh(q_id + k_jd), tanh recomputed in backward; from
//                    e^2q and e^2k (attention_tiles.h) where the head's |q|, |k| allow
//   lsa              the dot form with s = exp(min(l, ln 100)) and e_ii the lowest float
//                    (P_ii then 0, and dS_ii with it); dl = sum_i q_i . (dS_i K) = sum dS e
// Score rows are computed kTile tokens at a time from K^T (V^T in backward) copied into a
// (Dh, Tp) scratch, Tp = T rounded up to kTile with zero columns, so every inner loop has a
// fixed trip count the compiler turns into a few vector registers. Head sizes 8, 16, 24, 32,
// 48 and 64 are compiled for their size; others take the same code with a run-time size,
// whose loops the compiler cannot keep in registers: at less than half the speed.

namespace {

using namespace attention_tiles;
using namespace attention_head;

// Rows i0 .. i0+R-1 of one head's forward.
template <int kDh, int R>
void forward_rows(int i0, const Head& hd, float* out, float* att, uint8_t* att_mask,
                  QueryRows q, const float* v, uint64_t dropout_key, HeadScratch& w) {
  const int T = hd.T, D = hd.D, Dh = kDh ? kDh : hd.Dh, Tp = padded_tokens(T);
  const float* qi = q.rows + int64_t(i0) * q.ld;
#if defined(__AVX512F__)
  if constexpr (kDh > 0) {
    if (in_registers<kDh>(hd)) {
      float* P = att + hd.att_offset + int64_t(i0) * T;
      dispatch_vectors(Tp, [&](auto V) {
        if (hd.form == AttentionForm::additive)
          with_additive_pairs(hd, [&](auto pairs) {
            attention_avx512::additive_softmax_rows<kDh, V(), R, pairs()>(
                P, w.exp_q + int64_t(i0) * kDh, w.exp_kt, hd.additive_v, T);
          });
        else if (masks_own_token(hd))
          attention_avx512::score_softmax_rows<kDh, V(), R, true>(P, qi, q.ld, w.kt, hd.scale,
                                                                  T, i0);
        else
          attention_avx512::score_softmax_rows<kDh, V(), R>(P, qi, q.ld, w.kt, hd.scale, T);
      });
      rows_times_x<kDh, R>(out + int64_t(i0) * D, D, P, T, v, 3 * D, T, false);
      return;
    }
  }
#elif defined(__AVX2__) && defined(__FMA__)
  if constexpr (kDh > 0) {
    if (in_registers<kDh>(hd)) {
      float* P = att + hd.att_offset + int64_t(i0) * T;
      dispatch_vectors_of_8(T, [&](auto V) {
        constexpr int kCall = std::min(R, attention_avx2::rows_per_call(V()));
        for (int r = 0; r < R; r += kCall) {
          const float* qr = qi + int64_t(r) * q.ld;
          if (hd.form == AttentionForm::additive)
            with_additive_pairs(hd, [&](auto pairs) {
              attention_avx2::additive_softmax_rows<kDh, V(), kCall, pairs()>(
                  P + int64_t(r) * T, w.exp_q + int64_t(i0 + r) * kDh, w.exp_kt, Tp,
                  hd.additive_v, T);
            });
          else if (masks_own_token(hd))
            attention_avx2::score_softmax_rows<kDh, V(), kCall, true>(
                P + int64_t(r) * T, qr, q.ld, w.kt, Tp, hd.scale, T, i0 + r);
          else
            attention_avx2::score_softmax_rows<kDh, V(), kCall>(P + int64_t(r) * T, qr, q.ld,
                                                                w.kt, Tp, hd.scale, T);
        }
      });
      rows_times_x<kDh, R>(out + int64_t(i0) * D, D, P, T, v, 3 * D, T, false);
      return;
    }
  }
#endif
  score_rows<kDh, R>(i0, hd, qi, q.ld, w);
  if (masks_own_token(hd))  // the softmax weighs the lowest float as it weighs the padding
    for (int r = 0; r < R; ++r)
      w.score[int64_t(r) * Tp + i0 + r] = std::numeric_limits<float>::lowest();
  float* P = att + hd.att_offset + int64_t(i0) * T;
  for (int r = 0; r < R; ++r) {
    float* row = w.score + int64_t(r) * Tp;
    softmax_padded(row, T, Tp);
    std::copy(row, row + T, P + int64_t(r) * T);
  }
  const float* used = P;
  if (hd.dropout_p > 0.0f) {
    const float keep_scale = 1.0f / (1.0f - hd.dropout_p);
    const int64_t first = hd.att_offset + int64_t(i0) * T;
    for (int64_t e = 0; e < int64_t(R) * T; ++e)
      att_mask[first + e] =
          dropout_keep(dropout_key, hd.mask_first_index + first + e, hd.dropout_p);
    apply_dropout_mask(w.used, P, att_mask + first, int64_t(R) * T, keep_scale);
    used = w.used;
  }
  rows_times_x_dispatch<kDh, R>(out + int64_t(i0) * D, D, used, T, v, 3 * D, T, Dh, false);
}

// dS (in w.score, R rows of Tp) back through the score function into dq, dK and its
// parameters.
template <int kDh, int R>
void scores_backward(int i0, const Head& hd, float* dq, QueryRows q, const float* k,
                     float* dscore, HeadScratch& w, float* g, bool whole) {
  const int T = hd.T, D = hd.D, Dh = kDh ? kDh : hd.Dh, Tp = padded_tokens(T);
  const float* qi = q.rows + int64_t(i0) * q.ld;
  switch (hd.form) {
    case AttentionForm::scaled_dot:
    case AttentionForm::dot:
    case AttentionForm::lsa: {
      // lsa keeps dS K apart, in w.dqhat, for its temperature's gradient (backward_head)
      const bool apart = hd.form == AttentionForm::lsa;
      float* dq_rows = apart ? w.dqhat + int64_t(i0) * Dh : dq + int64_t(i0) * 3 * D;
      rows_times_x_dispatch<kDh, R>(dq_rows, apart ? Dh : 3 * D, g, Tp, k, 3 * D, T, Dh,
                                    false);           // dq = dS K, or lsa's dqhat = dS K
      if (!whole) add_outer<kDh, R>(w.dk, g, Tp, qi, q.ld, T, Dh);    // dK += dS^T q
      break;
    }
    case AttentionForm::cosine:
      rows_times_x_dispatch<kDh, R>(w.dqhat + int64_t(i0) * Dh, Dh, g, Tp, w.khat, Dh, T, Dh,
                                    false);                           // dqhat = dS Khat
      add_outer<kDh, R>(w.dk, g, Tp, qi, q.ld, T, Dh);                // dKhat += dS^T qhat
      break;
    case AttentionForm::additive:
      for (int r = 0; r < R; ++r)  // the padding columns of dS must add nothing
        std::fill(g + int64_t(r) * Tp + T, g + int64_t(r) * Tp + Tp, 0.0f);
      additive_backward_rows<kDh, R>(i0, hd, dq + int64_t(i0) * 3 * D, g, qi, q.ld, dscore, w);
      break;
  }
}

// Rows i0 .. i0+R-1 of one head's backward, down to dS; then into dq and the key, query
// and parameter gradients by the score function. `dscore` collects this head's share of
// the score function's parameter gradient.
template <int kDh, int R>
void backward_rows(int i0, const Head& hd, float* dq, const float* dout, QueryRows q,
                   const float* k, const float* att, const uint8_t* att_mask, float* dscore,
                   HeadScratch& w, bool whole) {
  const int T = hd.T, D = hd.D, Dh = kDh ? kDh : hd.Dh, Tp = padded_tokens(T);
  const float* P = att + hd.att_offset + int64_t(i0) * T;
  const float* dO = dout + int64_t(i0) * D;
  float* g = whole ? w.score + int64_t(i0) * Tp : w.score;
  const float* used = P;  // (R, T) like P
#if defined(__AVX512F__)
  if constexpr (kDh > 0) {
    if (in_registers<kDh>(hd)) {  // dS straight from dO V^T, with P
      dispatch_vectors(Tp, [&](auto V) {
        attention_avx512::softmax_backward_rows<kDh, V(), R>(g, dO, D, w.kt, P, hd.scale, T);
      });
      if (!whole) add_outer<kDh, R>(w.dv, P, T, dO, D, T, Dh);  // dV += P^T dO
      return scores_backward<kDh, R>(i0, hd, dq, q, k, dscore, w, g, whole);
    }
  }
#elif defined(__AVX2__) && defined(__FMA__)
  if constexpr (kDh > 0) {
    if (in_registers<kDh>(hd)) {  // dS straight from dO V^T, with P
      dispatch_vectors_of_8(T, [&](auto V) {
        constexpr int kCall = std::min(R, attention_avx2::rows_per_call(V()));
        for (int r = 0; r < R; r += kCall)
          attention_avx2::softmax_backward_rows<kDh, V(), kCall>(
              g + int64_t(r) * Tp, Tp, dO + int64_t(r) * D, D, w.kt, Tp, P + int64_t(r) * T,
              hd.scale, T);
      });
      if (!whole) add_outer<kDh, R>(w.dv, P, T, dO, D, T, Dh);  // dV += P^T dO
      return scores_backward<kDh, R>(i0, hd, dq, q, k, dscore, w, g, whole);
    }
  }
#endif
  rows_times_kt<kDh, R>(g, dO, D, w.kt, 1.0f, Tp, Dh);  // dP' = dO V^T
  if (hd.dropout_p > 0.0f) {  // forward: P' = P * mask / (1 - p); dP' -> dP through the mask
    const float keep_scale = 1.0f / (1.0f - hd.dropout_p);
    const uint8_t* mask = att_mask + hd.att_offset + int64_t(i0) * T;
    apply_dropout_mask(w.used, P, mask, int64_t(R) * T, keep_scale);
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < T; ++j)
        g[r * Tp + j] = mask[r * T + j] ? g[r * Tp + j] * keep_scale : 0.0f;
    used = w.used;
  }
  add_outer<kDh, R>(w.dv, used, T, dO, D, T, Dh);  // dV += P'^T dO
  for (int r = 0; r < R; ++r) {  // dS = P * (dP - <dP, P>), times the dot product's scale
    float* gr = g + int64_t(r) * Tp;
    const float* pr = P + int64_t(r) * T;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < T; ++j) dot += gr[j] * pr[j];
#pragma omp simd
    for (int j = 0; j < T; ++j) gr[j] = pr[j] * (gr[j] - dot) * hd.scale;
  }
  scores_backward<kDh, R>(i0, hd, dq, q, k, dscore, w, g, false);
}

template <int kDh>
void forward_head(int bh, int T, int D, int H, float* out, float* att, uint8_t* att_mask,
                  const float* qkv, const AttentionScore& score, float dropout_p,
                  uint64_t dropout_key, int64_t mask_first_index, HeadScratch& w) {
  Head hd = head_of(bh, T, D, H, score, dropout_p);
  hd.mask_first_index = mask_first_index;
  const int Dh = hd.Dh, b = bh / H, h = bh % H;
  const float* q = qkv + int64_t(b) * T * 3 * D + h * Dh;
  float* o = out + int64_t(b) * T * D + h * Dh;
  QueryRows rows{q, 3 * D};
  if (hd.form == AttentionForm::cosine) {
    normalise_rows(w.qhat, w.norms, q, 3 * D, T, Dh);
    normalise_rows(w.khat, w.norms + T, q + D, 3 * D, T, Dh);
    transpose_head<kDh>(w.kt, w.khat, Dh, T, Dh);  // Khat^T
    rows = {w.qhat, Dh};
  } else {
    if (hd.form == AttentionForm::additive) prepare_additive<kDh>(hd, q, q + D, 3 * D, true, w);
    if (!hd.additive_exps) transpose_head<kDh>(w.kt, q + D, 3 * D, T, Dh);  // K^T
  }
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  if constexpr (attention_tiles::whole_vectors<kDh>()) {
    if (in_registers<kDh>(hd) &&
        (hd.form != AttentionForm::additive || attention_short_tail::kAdditiveTails) &&
        attention_short_tail::forward_short_tail_head<kDh>(hd, o, att, rows, q + 2 * D, w))
      return;
  }
#endif
  for_row_steps<kRows>(T, true, [&](int i, auto n) {
    forward_rows<kDh, n()>(i, hd, o, att, att_mask, rows, q + 2 * D, dropout_key, w);
  });
}

// Whether a head's backward keeps dS for all its rows (in w.score) and sums dK and dV once
// over them (sum_whole_head) instead of a call of rows at a time: the dot forms in registers.
template <int kDh>
bool whole_head_sums(const Head& hd) {
  return attention_tiles::whole_vectors<kDh>() && in_registers<kDh>(hd) &&
         (hd.form == AttentionForm::scaled_dot || hd.form == AttentionForm::dot ||
          hd.form == AttentionForm::lsa);
}

// dK = dS^T q and dV = P^T dO over the head's rows, into its columns of dqkv.
template <int kDh>
void sum_whole_head(const Head& hd, float* dk, float* dv, QueryRows q, const float* att,
                    const float* dO, HeadScratch& w) {
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  if constexpr (attention_tiles::whole_vectors<kDh>()) {
    const int T = hd.T, D = hd.D;
    attention_tiles::columns_times_x<kDh>(dk, 3 * D, w.score, padded_tokens(T), q.rows, q.ld, T);
    attention_tiles::columns_times_x<kDh>(dv, 3 * D, att + hd.att_offset, T, dO, D, T);
  }
#endif
  (void)hd, (void)dk, (void)dv, (void)q, (void)att, (void)dO, (void)w;
}

template <int kDh>
void backward_head(int bh, int T, int D, int H, float* dqkv, float* dscore, const float* dout,
                   const float* qkv, const float* att, const uint8_t* att_mask,
                   const AttentionScore& score, float dropout_p, HeadScratch& w) {
  Head hd = head_of(bh, T, D, H, score, dropout_p);
  const int Dh = hd.Dh, b = bh / H, h = bh % H;
  const int64_t base = int64_t(b) * T * 3 * D + h * Dh;
  const float *q = qkv + base, *k = q + D, *v = q + 2 * D;
  float *dq = dqkv + base, *dk = dq + D, *dv = dq + 2 * D;
  const float* dO = dout + int64_t(b) * T * D + h * Dh;
  transpose_head<kDh>(w.kt, v, 3 * D, T, Dh);  // V^T for dP' = dO V^T
  const bool whole = whole_head_sums<kDh>(hd);
  if (!whole) {
    std::fill_n(w.dk, int64_t(T) * Dh, 0.0f);
    std::fill_n(w.dv, int64_t(T) * Dh, 0.0f);
  }
  // The head's columns of dqkv are set, not added to. The dot forms store dq row block by
  // row block; cosine and additive sum into dq (cosine into dK too), so those start at zero.
  if (hd.form == AttentionForm::cosine || hd.form == AttentionForm::additive)
    zero_head_columns(dq, 3 * D, T, Dh);
  if (hd.form == AttentionForm::cosine) zero_head_columns(dk, 3 * D, T, Dh);
  QueryRows rows{q, 3 * D};
  if (hd.form == AttentionForm::cosine) {
    normalise_rows(w.qhat, w.norms, q, 3 * D, T, Dh);
    normalise_rows(w.khat, w.norms + T, k, 3 * D, T, Dh);
    rows = {w.qhat, Dh};
  } else if (hd.form == AttentionForm::additive) {
    prepare_additive<kDh>(hd, q, k, 3 * D, false, w);
    if (!hd.additive_exps) {  // the tanh path sums dK transposed, in w.dkt
      transpose_head<kDh>(w.keys_t, k, 3 * D, T, Dh);
      std::fill_n(w.dkt, int64_t(Dh) * padded_tokens(T), 0.0f);
    }
    std::fill_n(dscore, Dh, 0.0f);
  }
  // The additive form's backward sums its gradients over a call's rows before it adds them
  // on: pairing its rows would regroup those sums, so it takes calls of kRows and of one.
  for_row_steps<kRows>(T, hd.form != AttentionForm::additive, [&](int i, auto n) {
    backward_rows<kDh, n()>(i, hd, dq, dO, rows, k, att, att_mask, dscore, w, whole);
  });

  if (hd.form == AttentionForm::cosine) {
    // dl = sum_i qhat_i . dqhat_i (de/dl = e below the cap), then through qhat and khat.
    const float dl = sum_of_row_products<kDh>(w.qhat, Dh, w.dqhat, T, Dh);
    dscore[0] = hd.scale_capped ? 0.0f : dl;
    add_through_normalisation(dq, 3 * D, w.dqhat, w.qhat, w.norms, T, Dh);
    add_through_normalisation(dk, 3 * D, w.dk, w.khat, w.norms + T, T, Dh);
  } else if (hd.form == AttentionForm::lsa) {
    // dl = sum_i q_i . (dS_i K), dS holding the temperature already; dS K is dq.
    const float dl = sum_of_row_products<kDh>(q, 3 * D, w.dqhat, T, Dh);
    copy_into_head_columns<kDh>(dq, 3 * D, w.dqhat, T, Dh);
    dscore[0] = hd.scale_capped ? 0.0f : dl;
  } else if (hd.form == AttentionForm::additive && !hd.additive_exps) {
    const int Tp = padded_tokens(T);
    for (int j = 0; j < T; ++j)
      for (int d = 0; d < Dh; ++d) dk[int64_t(j) * 3 * D + d] = w.dkt[int64_t(d) * Tp + j];
  }
  if (whole) return sum_whole_head<kDh>(hd, dk, dv, rows, att, dO, w);
  const bool dk_in_rows = hd.form == AttentionForm::scaled_dot || hd.form == AttentionForm::dot ||
                          hd.form == AttentionForm::lsa || hd.additive_exps;  // else above
  if (dk_in_rows) copy_into_head_columns<kDh>(dk, 3 * D, w.dk, T, Dh);
  copy_into_head_columns<kDh>(dv, 3 * D, w.dv, T, Dh);
}

// Calls run(kDh) with kDh a std::integral_constant: the head size when it is one compiled
// for, else 0.
template <typename Run>
void dispatch_head_size(int Dh, Run&& run) {
  switch (Dh) {
    case 8: return run(std::integral_constant<int, 8>{});
    case 16: return run(std::integral_constant<int, 16>{});
    case 24: return run(std::integral_constant<int, 24>{});
    case 32: return run(std::integral_constant<int, 32>{});
    case 48: return run(std::integral_constant<int, 48>{});
    case 64: return run(std::integral_constant<int, 64>{});
    default: return run(std::integral_constant<int, 0>{});
  }
}

[[noreturn]] void throw_scratch_slots(int slot, int slots) {
  throw std::logic_error("attention: thread " + std::to_string(slot) +
                         " of a parallel region, but scratch for " + std::to_string(slots) +
                         " threads");
}

// Calls per_head(kDh, bh, scratch) for every (batch, head) bh in [pair_begin, pair_end)
// across the thread pool, with kDh a std::integral_constant: the head size when it is one
// compiled for, else 0. Thread i works in row i of `scratch` (slots rows of
// attention_scratch_floats(T, Dh)).
template <typename PerHead>
void for_each_head(int pair_begin, int pair_end, int T, int Dh, float* scratch, int slots,
                   PerHead&& per_head) {
  const int64_t row_floats = attention_scratch_floats(T, Dh);
  auto prepare = [&](int slot) {
    HeadScratch w;
    lay_out_scratch(scratch + slot * row_floats, T, Dh, &w);
    std::fill_n(w.kt, int64_t(Dh) * padded_tokens(T), 0.0f);  // the padding columns
    std::fill_n(w.keys_t, int64_t(Dh) * padded_tokens(T), 0.0f);
    std::fill_n(w.exp_kt, int64_t(Dh) * padded_tokens(T), 1.0f);
    return w;
  };
  // Inside a parallel region (a chunk of the batch, vit.cpp) the calling thread runs every
  // pair in its own slot: the region's threads number at most `slots`. So does a lone
  // thread, without a region of its own (one costs about a microsecond even for a team of
  // one, and an image's forward on one thread opens one a block).
  const int threads = std::max(1, std::min(omp_get_max_threads(), slots));
  if (omp_in_parallel() || threads == 1) {
    const int slot = omp_get_thread_num();
    if (slot >= slots) throw_scratch_slots(slot, slots);
    auto run_here = [&](auto kDh) {
      HeadScratch w = prepare(slot);
      for (int bh = pair_begin; bh < pair_end; ++bh) per_head(kDh, bh, w);
    };
    return dispatch_head_size(Dh, run_here);
  }
  auto run = [&](auto kDh) {
#pragma omp parallel num_threads(threads)
    {
      HeadScratch w = prepare(omp_get_thread_num());
#pragma omp for schedule(static)
      for (int bh = pair_begin; bh < pair_end; ++bh) per_head(kDh, bh, w);
    }
  };
  dispatch_head_size(Dh, run);
}

}  // namespace

int64_t attention_scratch_floats(int T, int Dh) { return lay_out_scratch(nullptr, T, Dh, nullptr); }

int64_t attention_score_grad_floats(int B, int H, int Dh) { return int64_t(B) * H * Dh; }

void attention_forward(float* out, float* att, uint8_t* att_mask, const float* qkv, int B,
                       int T, int D, int H, const AttentionScore& score, float dropout_p,
                       uint64_t dropout_key, float* scratch, int slots,
                       int64_t mask_first_index) {
  for_each_head(0, B * H, T, D / H, scratch, slots, [&](auto kDh, int bh, HeadScratch& w) {
    forward_head<kDh()>(bh, T, D, H, out, att, att_mask, qkv, score, dropout_p, dropout_key,
                        mask_first_index, w);
  });
}

void attention_forward_pairs(float* out, float* att, const float* qkv, int T, int D, int H,
                             const AttentionScore& score, float* scratch, int slots,
                             int pair_begin, int pair_end) {
  for_each_head(pair_begin, pair_end, T, D / H, scratch, slots,
                [&](auto kDh, int bh, HeadScratch& w) {
                  forward_head<kDh()>(bh, T, D, H, out, att, nullptr, qkv, score, 0.0f, 0, 0, w);
                });
}

void attention_backward(float* dqkv, const AttentionScoreGrad& dscore, const float* dout,
                        const float* qkv, const float* att, const uint8_t* att_mask, int B,
                        int T, int D, int H, const AttentionScore& score, float dropout_p,
                        float* scratch, int slots) {
  attention_backward_pairs(dqkv, dscore, dout, qkv, att, att_mask, B, T, D, H, score, dropout_p,
                           scratch, slots);
  attention_add_score_grads(dscore, B, H, D / H, score.form);
}

void attention_backward_pairs(float* dqkv, const AttentionScoreGrad& dscore, const float* dout,
                              const float* qkv, const float* att, const uint8_t* att_mask,
                              int B, int T, int D, int H, const AttentionScore& score,
                              float dropout_p, float* scratch, int slots) {
  const int Dh = D / H;
  const bool learned = attention_has_score_params(score.form);
  for_each_head(0, B * H, T, Dh, scratch, slots, [&](auto kDh, int bh, HeadScratch& w) {
    float* share = learned ? dscore.per_pair + int64_t(bh) * Dh : nullptr;
    backward_head<kDh()>(bh, T, D, H, dqkv, share, dout, qkv, att, att_mask, score, dropout_p,
                         w);
  });
}

void attention_add_score_grads(const AttentionScoreGrad& dscore, int B, int H, int Dh,
                               AttentionForm form) {
  // Each (batch, head) left its share of the score parameters' gradient in per_pair; they
  // are added in batch order, so the sum does not depend on which thread ran which pair.
  if (!attention_has_score_params(form)) return;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const float* share = dscore.per_pair + (int64_t(b) * H + h) * Dh;
      if (form == AttentionForm::cosine || form == AttentionForm::lsa)
        dscore.logit_scale[h] += share[0];
      else
        for (int d = 0; d < Dh; ++d) dscore.additive_v[int64_t(h) * Dh + d] += share[d];
    }
}

void attention_weights_grad(float* datt, const float* dout, const float* qkv,
                            const uint8_t* att_mask, int B, int T, int D, int H,
                            float dropout_p) {
  const int Dh = D / H;
  const float keep_scale = dropout_p > 0.0f ? 1.0f / (1.0f - dropout_p) : 1.0f;
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < B * H; ++bh) {
    const int b = bh / H, h = bh % H;
    const float* v = qkv + int64_t(b) * T * 3 * D + 2 * D + h * Dh;  // row stride 3D
    const float* o = dout + int64_t(b) * T * D + h * Dh;                // row stride D
    float* g = datt + int64_t(bh) * T * T;
    const uint8_t* mask = dropout_p > 0.0f ? att_mask + int64_t(bh) * T * T : nullptr;
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < T; ++j) {
        float s = 0.0f;
        for (int d = 0; d < Dh; ++d) s += o[int64_t(i) * D + d] * v[int64_t(j) * 3 * D + d];
        g[int64_t(i) * T + j] = mask ? s * float(mask[int64_t(i) * T + j]) * keep_scale : s;
      }
  }
}

MINIVIT_ISA_END
}  // namespace minivit
