#include "minivit/attention.h"

#include <cmath>
#include <vector>

#include "minivit/dropout.h"
#include "minivit/vecmath.h"
#include "minivit/gemm.h"

namespace minivit {

// The attention weights after dropout, P' = P * mask / (1 - p), for one (batch, head).
static void apply_attention_dropout(float* dropped, const float* att, const uint8_t* mask,
                                    int64_t n, float p) {
  const float scale = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < n; ++i) dropped[i] = mask[i] ? att[i] * scale : 0.0f;
}

void attention_forward(float* out, float* att, uint8_t* att_mask, const float* qkv, int B,
                       int T, int D, int H, float dropout_p, uint64_t dropout_key) {
  const int Dh = D / H;
  const float scale = 1.0f / std::sqrt(float(Dh));
  const int64_t TT = int64_t(T) * T;
  const bool dropout = dropout_p > 0.0f;
#pragma omp parallel
  {
    thread_local std::vector<float> dropped;  // (T, T) scratch for P'
    if (dropout) dropped.resize(size_t(TT));
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * H; ++bh) {
      const int b = bh / H, h = bh % H;
      const float* q = qkv + int64_t(b) * T * 3 * D + h * Dh;
      const float* k = q + D;
      const float* v = q + 2 * D;
      float* P = att + bh * TT;
      gemm(false, true, T, T, Dh, scale, q, 3 * D, k, 3 * D, 0.0f, P, T);  // S = q k^T / sqrt(Dh)
      for (int i = 0; i < T; ++i) {  // row softmax, shifted by the row max for stability
        float* row = P + int64_t(i) * T;
        float maxv = row[0];
#pragma omp simd reduction(max : maxv)
        for (int j = 1; j < T; ++j) maxv = row[j] > maxv ? row[j] : maxv;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < T; ++j) {
          row[j] = expf(row[j] - maxv);
          sum += row[j];
        }
        const float inv = 1.0f / sum;
#pragma omp simd
        for (int j = 0; j < T; ++j) row[j] *= inv;
      }
      const float* P_used = P;
      if (dropout) {
        uint8_t* mask = att_mask + bh * TT;
        for (int64_t i = 0; i < TT; ++i) mask[i] = dropout_keep(dropout_key, bh * TT + i, dropout_p);
        apply_attention_dropout(dropped.data(), P, mask, TT, dropout_p);
        P_used = dropped.data();
      }
      float* o = out + int64_t(b) * T * D + h * Dh;
      gemm(false, false, T, Dh, T, 1.0f, P_used, T, v, 3 * D, 0.0f, o, D);  // O = P' v
    }
  }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        const uint8_t* att_mask, int B, int T, int D, int H, float dropout_p) {
  const int Dh = D / H;
  const float scale = 1.0f / std::sqrt(float(Dh));
  const int64_t TT = int64_t(T) * T;
  const bool dropout = dropout_p > 0.0f;
  const float keep_scale = dropout ? 1.0f / (1.0f - dropout_p) : 1.0f;
#pragma omp parallel
  {
    thread_local std::vector<float> dP;       // (T, T) gradient of the attention weights
    thread_local std::vector<float> dropped;  // (T, T) P' recomputed from P and the mask
    dP.resize(size_t(TT));
    if (dropout) dropped.resize(size_t(TT));
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * H; ++bh) {
      const int b = bh / H, h = bh % H;
      const int64_t base = int64_t(b) * T * 3 * D + h * Dh;
      const float *q = qkv + base, *k = q + D, *v = q + 2 * D;
      float *dq = dqkv + base, *dk = dq + D, *dv = dq + 2 * D;
      const float* P = att + bh * TT;
      const uint8_t* mask = dropout ? att_mask + bh * TT : nullptr;
      const float* dO = dout + int64_t(b) * T * D + h * Dh;
      const float* P_used = P;
      if (dropout) {
        apply_attention_dropout(dropped.data(), P, mask, TT, dropout_p);
        P_used = dropped.data();
      }
      // forward: O = P' v
      gemm(false, true, T, T, Dh, 1.0f, dO, D, v, 3 * D, 0.0f, dP.data(), T);  // dP' = dO v^T
      gemm(true, false, T, Dh, T, 1.0f, P_used, T, dO, D, 1.0f, dv, 3 * D);    // dv += P'^T dO
      // forward: P' = P * mask / (1 - p);  P = softmax(S)
      // dS = P * (dP - sum_j dP P), row by row; dP' -> dP through the mask first.
      for (int i = 0; i < T; ++i) {
        float* g = dP.data() + int64_t(i) * T;
        const float* p = P + int64_t(i) * T;
        if (dropout) {
          const uint8_t* m = mask + int64_t(i) * T;
          for (int j = 0; j < T; ++j) g[j] = m[j] ? g[j] * keep_scale : 0.0f;
        }
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int j = 0; j < T; ++j) dot += g[j] * p[j];
        for (int j = 0; j < T; ++j) g[j] = p[j] * (g[j] - dot);
      }
      // forward: S = q k^T * scale
      gemm(false, false, T, Dh, T, scale, dP.data(), T, k, 3 * D, 1.0f, dq, 3 * D);  // dq += dS k
      gemm(true, false, T, Dh, T, scale, dP.data(), T, q, 3 * D, 1.0f, dk, 3 * D);   // dk += dS^T q
    }
  }
}

}  // namespace minivit
