#include "minivit/nn/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "minivit/kernels/vecmath.h"
#include "minivit/nn/dropout.h"

namespace minivit {

// Each (batch, head) is a handful of (T, Dh) x (Dh, T) products with T around 50 and Dh
// around 16: too small for BLAS, whose per-call packing costs more than the arithmetic
// (through gemm the attention core took 31% of a training step for 16% of its FLOPs; in
// the loops below, 21%). One thread runs a whole (batch, head), kRows query rows at a time,
// with everything it touches in L1:
//   forward   s = q_i K^T * scale, softmax, o_i = P'_i V
//   backward  dP'_i = dO_i V^T, dV += P'_i^T dO_i, dS_i = P_i (dP_i - <dP_i, P_i>),
//             dq_i = dS_i K * scale, dK += dS_i^T q_i * scale
// Score rows are computed kTile tokens at a time from K^T (V^T in backward) copied into a
// (Dh, Tp) scratch, Tp = T rounded up to kTile with zero columns, so every inner loop has a
// fixed trip count the compiler turns into a few vector registers. Head sizes 8, 16, 32
// and 64 are compiled for their size; others take the same code with a run-time size.

namespace {

constexpr int kTile = 16;  // score columns per step
constexpr int kRows = 4;   // query rows per step: independent sums keep the FMA units busy

int padded_tokens(int T) { return (T + kTile - 1) / kTile * kTile; }

// One thread's scratch: views into its row of the caller's scratch buffer, each view
// starting on a cache line.
struct HeadScratch {
  float* kt;     // (Dh, Tp) K^T, or V^T in backward; padding columns zero
  float* score;  // (kRows, Tp) rows of scores, or of dP' in backward
  float* used;   // (kRows, T) rows of P' = P * mask / (1 - p)
  float* dk;     // (T, Dh) dK for this head, added into dqkv at the end
  float* dv;     // (T, Dh) dV likewise
};

constexpr int64_t kLineFloats = 16;
int64_t whole_lines(int64_t floats) {
  return (floats + kLineFloats - 1) / kLineFloats * kLineFloats;
}

// Lays out one thread's views over `row` in the order of HeadScratch, returning the floats
// they take; with views == nullptr it only counts.
int64_t lay_out_scratch(float* row, int T, int Dh, HeadScratch* views) {
  const int64_t Tp = padded_tokens(T);
  const int64_t sizes[5] = {Dh * Tp, kRows * Tp, kRows * int64_t(T), int64_t(T) * Dh,
                            int64_t(T) * Dh};
  int64_t offsets[5], total = 0;
  for (int i = 0; i < 5; ++i) {
    offsets[i] = total;
    total += whole_lines(sizes[i]);
  }
  if (views)
    *views = HeadScratch{row + offsets[0], row + offsets[1], row + offsets[2], row + offsets[3],
                         row + offsets[4]};
  return total;
}

// kt (Dh, Tp) = x^T for x (T, Dh) with row stride ld; the padding columns stay zero.
template <int kDh>
void transpose_head(float* __restrict kt, const float* __restrict x, int ld, int T, int dh) {
  const int Dh = kDh ? kDh : dh;
  const int Tp = padded_tokens(T);
  for (int j = 0; j < T; ++j)
    for (int d = 0; d < Dh; ++d) kt[d * Tp + j] = x[int64_t(j) * ld + d];
}

// rows (R, Tp) = alpha * a (R, Dh; row stride lda) . kt (Dh, Tp), kTile columns at a time.
template <int kDh, int R>
void rows_times_kt(float* __restrict rows, const float* __restrict a, int lda,
                   const float* __restrict kt, float alpha, int Tp, int dh) {
  const int Dh = kDh ? kDh : dh;
  for (int j0 = 0; j0 < Tp; j0 += kTile) {
    float tile[R][kTile] = {};
    for (int d = 0; d < Dh; ++d) {
      const float* k = kt + int64_t(d) * Tp + j0;
      for (int r = 0; r < R; ++r) {
        const float ad = a[int64_t(r) * lda + d];
#pragma omp simd
        for (int j = 0; j < kTile; ++j) tile[r][j] += ad * k[j];
      }
    }
    for (int r = 0; r < R; ++r)
#pragma omp simd
      for (int j = 0; j < kTile; ++j) rows[int64_t(r) * Tp + j0 + j] = alpha * tile[r][j];
  }
}

// out (R, Dh; row stride ldo) (+)= w (R, T; row stride ldw) . x (T, Dh; row stride ldx).
// The sums live in a local array the compiler keeps in registers.
template <int kDh, int R>
void rows_times_x(float* __restrict out, int ldo, const float* __restrict w, int ldw,
                  const float* __restrict x, int ldx, int T, bool add) {
  static_assert(kDh > 0, "a compiled head size");
  float acc[R][kDh] = {};
  for (int j = 0; j < T; ++j) {
    const float* xj = x + int64_t(j) * ldx;
    for (int r = 0; r < R; ++r) {
      const float wr = w[int64_t(r) * ldw + j];
#pragma omp simd
      for (int d = 0; d < kDh; ++d) acc[r][d] += wr * xj[d];
    }
  }
  for (int r = 0; r < R; ++r) {
    float* o = out + int64_t(r) * ldo;
    if (add) {
#pragma omp simd
      for (int d = 0; d < kDh; ++d) o[d] += acc[r][d];
    } else {
#pragma omp simd
      for (int d = 0; d < kDh; ++d) o[d] = acc[r][d];
    }
  }
}

// The same for a head size known only at run time, one row at a time.
void rows_times_x_any(float* __restrict out, int ldo, const float* __restrict w, int ldw,
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
void softmax_padded(float* __restrict row, int T, int Tp) {
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

// used (n) = P' = P * mask / (1 - p): the attention weights after dropout, in forward for
// the value sum and in backward for dV.
void apply_dropout_mask(float* __restrict used, const float* __restrict P,
                        const uint8_t* __restrict mask, int64_t n, float keep_scale) {
  for (int64_t e = 0; e < n; ++e) used[e] = mask[e] ? P[e] * keep_scale : 0.0f;
}

// One (batch, head): what its slices of the (B, T, 3D), (B, T, D) and (B, H, T, T) buffers
// need to be found and used.
struct Head {
  int T, D, Dh;
  float scale;     // 1 / sqrt(Dh)
  float dropout_p;
  int64_t att_offset;  // of this head's (T, T) block in att and att_mask
};

// Rows i0 .. i0+R-1 of one head's forward.
template <int kDh, int R>
void forward_rows(int i0, const Head& hd, float* out, float* att, uint8_t* att_mask,
                  const float* q, const float* v, uint64_t dropout_key, HeadScratch& w) {
  const int T = hd.T, D = hd.D, Dh = kDh ? kDh : hd.Dh, Tp = padded_tokens(T);
  rows_times_kt<kDh, R>(w.score, q + int64_t(i0) * 3 * D, 3 * D, w.kt, hd.scale,
                        Tp, Dh);
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
      att_mask[first + e] = dropout_keep(dropout_key, first + e, hd.dropout_p);
    apply_dropout_mask(w.used, P, att_mask + first, int64_t(R) * T, keep_scale);
    used = w.used;
  }
  rows_times_x_dispatch<kDh, R>(out + int64_t(i0) * D, D, used, T, v, 3 * D, T, Dh, false);
}

// Rows i0 .. i0+R-1 of one head's backward.
template <int kDh, int R>
void backward_rows(int i0, const Head& hd, float* dq, const float* dout, const float* q,
                   const float* k, const float* att, const uint8_t* att_mask, HeadScratch& w) {
  const int T = hd.T, D = hd.D, Dh = kDh ? kDh : hd.Dh, Tp = padded_tokens(T);
  const float* P = att + hd.att_offset + int64_t(i0) * T;
  const float* dO = dout + int64_t(i0) * D;
  float* g = w.score;
  rows_times_kt<kDh, R>(g, dO, D, w.kt, 1.0f, Tp, Dh);  // dP' = dO V^T
  const float* used = P;  // (R, T) like P
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
  for (int r = 0; r < R; ++r) {  // dS = P * (dP - <dP, P>), times the forward's scale
    float* gr = g + int64_t(r) * Tp;
    const float* pr = P + int64_t(r) * T;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < T; ++j) dot += gr[j] * pr[j];
#pragma omp simd
    for (int j = 0; j < T; ++j) gr[j] = pr[j] * (gr[j] - dot) * hd.scale;
  }
  rows_times_x_dispatch<kDh, R>(dq + int64_t(i0) * 3 * D, 3 * D, g, Tp, k, 3 * D, T, Dh,
                                true);                                   // dq += dS K
  add_outer<kDh, R>(w.dk, g, Tp, q + int64_t(i0) * 3 * D, 3 * D, T, Dh);  // dK += dS^T q
}

template <int kDh>
void forward_head(int bh, int T, int D, int H, float* out, float* att, uint8_t* att_mask,
                  const float* qkv, float dropout_p, uint64_t dropout_key, HeadScratch& w) {
  const int Dh = D / H, b = bh / H, h = bh % H;
  const Head hd{T, D, Dh, 1.0f / std::sqrt(float(Dh)), dropout_p, int64_t(bh) * T * T};
  const float* q = qkv + int64_t(b) * T * 3 * D + h * Dh;
  float* o = out + int64_t(b) * T * D + h * Dh;
  transpose_head<kDh>(w.kt, q + D, 3 * D, T, Dh);  // K^T
  int i = 0;
  for (; i + kRows <= T; i += kRows)
    forward_rows<kDh, kRows>(i, hd, o, att, att_mask, q, q + 2 * D, dropout_key, w);
  for (; i < T; ++i) forward_rows<kDh, 1>(i, hd, o, att, att_mask, q, q + 2 * D, dropout_key, w);
}

template <int kDh>
void backward_head(int bh, int T, int D, int H, float* dqkv, const float* dout,
                   const float* qkv, const float* att, const uint8_t* att_mask, float dropout_p,
                   HeadScratch& w) {
  const int Dh = D / H, b = bh / H, h = bh % H;
  const Head hd{T, D, Dh, 1.0f / std::sqrt(float(Dh)), dropout_p, int64_t(bh) * T * T};
  const int64_t base = int64_t(b) * T * 3 * D + h * Dh;
  const float *q = qkv + base, *k = q + D, *v = q + 2 * D;
  float *dq = dqkv + base, *dk = dq + D, *dv = dq + 2 * D;
  const float* dO = dout + int64_t(b) * T * D + h * Dh;
  transpose_head<kDh>(w.kt, v, 3 * D, T, Dh);  // V^T for dP' = dO V^T
  std::fill_n(w.dk, int64_t(T) * Dh, 0.0f);
  std::fill_n(w.dv, int64_t(T) * Dh, 0.0f);
  int i = 0;
  for (; i + kRows <= T; i += kRows)
    backward_rows<kDh, kRows>(i, hd, dq, dO, q, k, att, att_mask, w);
  for (; i < T; ++i) backward_rows<kDh, 1>(i, hd, dq, dO, q, k, att, att_mask, w);
  for (int j = 0; j < T; ++j)
    for (int d = 0; d < Dh; ++d) {
      dk[int64_t(j) * 3 * D + d] += w.dk[int64_t(j) * Dh + d];
      dv[int64_t(j) * 3 * D + d] += w.dv[int64_t(j) * Dh + d];
    }
}

// Calls per_head(kDh, bh, scratch) for every (batch, head) bh < BH across the thread pool,
// with kDh a std::integral_constant: the head size when it is one compiled for, else 0.
// Thread i works in row i of `scratch` (slots rows of attention_scratch_floats(T, Dh)).
template <typename PerHead>
void for_each_head(int BH, int T, int Dh, float* scratch, int slots, PerHead&& per_head) {
  const int threads = std::max(1, std::min(omp_get_max_threads(), slots));
  const int64_t row_floats = attention_scratch_floats(T, Dh);
  auto run = [&](auto kDh) {
#pragma omp parallel num_threads(threads)
    {
      HeadScratch w;
      float* row = scratch + omp_get_thread_num() * row_floats;
      lay_out_scratch(row, T, Dh, &w);
      std::fill_n(w.kt, int64_t(Dh) * padded_tokens(T), 0.0f);  // the padding columns
#pragma omp for schedule(static)
      for (int bh = 0; bh < BH; ++bh) per_head(kDh, bh, w);
    }
  };
  switch (Dh) {
    case 8: run(std::integral_constant<int, 8>{}); break;
    case 16: run(std::integral_constant<int, 16>{}); break;
    case 32: run(std::integral_constant<int, 32>{}); break;
    case 64: run(std::integral_constant<int, 64>{}); break;
    default: run(std::integral_constant<int, 0>{}); break;
  }
}

}  // namespace

int64_t attention_scratch_floats(int T, int Dh) { return lay_out_scratch(nullptr, T, Dh, nullptr); }

void attention_forward(float* out, float* att, uint8_t* att_mask, const float* qkv, int B,
                       int T, int D, int H, float dropout_p, uint64_t dropout_key,
                       float* scratch, int slots) {
  for_each_head(B * H, T, D / H, scratch, slots, [&](auto kDh, int bh, HeadScratch& w) {
    forward_head<kDh()>(bh, T, D, H, out, att, att_mask, qkv, dropout_p, dropout_key, w);
  });
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        const uint8_t* att_mask, int B, int T, int D, int H, float dropout_p,
                        float* scratch, int slots) {
  for_each_head(B * H, T, D / H, scratch, slots, [&](auto kDh, int bh, HeadScratch& w) {
    backward_head<kDh()>(bh, T, D, H, dqkv, dout, qkv, att, att_mask, dropout_p, w);
  });
}

}  // namespace minivit
