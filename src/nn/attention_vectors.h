#pragma once
// The attention core's sums over a head's rows in named vector registers (HeadVec): the
// value products of a few rows (rows_times_x_in_vectors) and, over a head's rows, dK and dV
// (columns_times_x); with two_sums, which says how those sums pair their terms. Internal to
// src/nn (attention_tiles.h and attention.cpp are its users).
#include <algorithm>
#include <cstdint>

#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN
namespace attention_tiles {

// Even and odd j in separate sums: with one, a 16-wide head gave R chains of dependent
// FMAs, too few to cover the FMA latency (7% of a training step's samples). Where 2 R kDh
// floats would fill AVX2's 16 registers, one sum: R kDh / 8 chains are enough there, and
// the two spilled to the stack on every j.
template <int kDh, int R>
constexpr bool two_sums() {
#if defined(__AVX2__) && !defined(__AVX512F__)
  return R * kDh <= 48;
#else
  return true;
#endif
}

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
MINIVIT_INTRINSICS_BEGIN
// The level's float vector, for rows_times_x_in_vectors.
struct HeadVec {
#if defined(__AVX512F__)
  using V = __m512;
  static constexpr int kLanes = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
#else
  using V = __m256;
  static constexpr int kLanes = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
#endif
};
MINIVIT_INTRINSICS_END
#endif

// Whether a head size is whole vectors of the level's floats, which the sums in named vector
// registers below take; never at a level without them.
template <int kDh>
constexpr bool whole_vectors() {
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  return kDh > 0 && kDh % HeadVec::kLanes == 0;
#else
  return false;
#endif
}

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
MINIVIT_INTRINSICS_BEGIN
// Whether rows_times_x runs in named vector registers: head sizes of whole vectors whose
// sums fit the registers (at AVX-512 two sums a row always, 16 vectors at most).
template <int kDh, int R>
constexpr bool sums_in_vectors() {
  if (!whole_vectors<kDh>()) return false;
#if defined(__AVX512F__)
  return R * (kDh / HeadVec::kLanes) <= 8;
#else
  return true;
#endif
}

// rows_times_x (below) in vector registers named as such: the same sums. From a local float
// array GCC cleared the array in memory on every call (`rep stos` at the AVX2 level, a
// quarter of the samples of a 4-row call at head size 16; vector stores at AVX-512's) and
// stored the sums back through it before copying them out.
template <int kDh, int R>
void rows_times_x_in_vectors(float* __restrict out, int ldo, const float* __restrict w,
                             int ldw, const float* __restrict x, int ldx, int T, bool add) {
  using V = HeadVec::V;
  constexpr int kL = HeadVec::kLanes, kV = kDh / kL;
  constexpr bool kTwoSums = two_sums<kDh, R>();
  V acc[R][kV], acc_odd[R][kV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < kV; ++v) acc[r][v] = acc_odd[r][v] = HeadVec::zero();
  int j = 0;
  if constexpr (kTwoSums) {
    for (; j + 1 < T; j += 2) {
      const float* xj = x + int64_t(j) * ldx;
      const float* xk = xj + ldx;
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const V wr = HeadVec::broadcast(w + int64_t(r) * ldw + j);
        const V wk = HeadVec::broadcast(w + int64_t(r) * ldw + j + 1);
#pragma GCC unroll 8
        for (int v = 0; v < kV; ++v) {
          acc[r][v] = HeadVec::fmadd(wr, HeadVec::load(xj + kL * v), acc[r][v]);
          acc_odd[r][v] = HeadVec::fmadd(wk, HeadVec::load(xk + kL * v), acc_odd[r][v]);
        }
      }
    }
  }
  for (; j < T; ++j) {  // every j with one sum; the last odd one with two
    const float* xj = x + int64_t(j) * ldx;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V wr = HeadVec::broadcast(w + int64_t(r) * ldw + j);
#pragma GCC unroll 8
      for (int v = 0; v < kV; ++v)
        acc[r][v] = HeadVec::fmadd(wr, HeadVec::load(xj + kL * v), acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* o = out + int64_t(r) * ldo;
#pragma GCC unroll 8
    for (int v = 0; v < kV; ++v) {
      const V sum = kTwoSums ? HeadVec::add(acc[r][v], acc_odd[r][v]) : acc[r][v];
      HeadVec::store(o + kL * v, add ? HeadVec::add(HeadVec::load(o + kL * v), sum) : sum);
    }
  }
}

// out rows [j0, j0 + NJ) (row stride ldo) = sum over i < T of w[i][j] x_i, w (T, .) with row
// stride ldw, x (T, kDh) with row stride ldx: each element summed over i in order from zero,
// by FMA, as add_outer sums it a call of rows at a time.
template <int kDh, int NJ>
void columns_times_x_block(float* __restrict out, int ldo, const float* __restrict w, int ldw,
                           const float* __restrict x, int ldx, int T, int j0) {
  using V = HeadVec::V;
  constexpr int kL = HeadVec::kLanes, kV = kDh / kL;
  V acc[NJ][kV];
#pragma GCC unroll 16
  for (int jj = 0; jj < NJ; ++jj)
#pragma GCC unroll 8
    for (int v = 0; v < kV; ++v) acc[jj][v] = HeadVec::zero();
  for (int i = 0; i < T; ++i) {
    const float* wi = w + int64_t(i) * ldw + j0;
    const float* xi = x + int64_t(i) * ldx;
    V xv[kV];
#pragma GCC unroll 8
    for (int v = 0; v < kV; ++v) xv[v] = HeadVec::load(xi + kL * v);
#pragma GCC unroll 16
    for (int jj = 0; jj < NJ; ++jj) {
      const V wj = HeadVec::broadcast(wi + jj);
#pragma GCC unroll 8
      for (int v = 0; v < kV; ++v) acc[jj][v] = HeadVec::fmadd(wj, xv[v], acc[jj][v]);
    }
  }
#pragma GCC unroll 16
  for (int jj = 0; jj < NJ; ++jj)
#pragma GCC unroll 8
    for (int v = 0; v < kV; ++v)
      HeadVec::store(out + int64_t(j0 + jj) * ldo + kL * v, acc[jj][v]);
}

// columns_times_x_block for the last `left` rows, left <= NJ.
template <int kDh, int NJ>
void columns_times_x_tail(int left, float* out, int ldo, const float* w, int ldw, const float* x,
                          int ldx, int T, int j0) {
  if constexpr (NJ >= 1) {
    if (left == NJ) return columns_times_x_block<kDh, NJ>(out, ldo, w, ldw, x, ldx, T, j0);
    return columns_times_x_tail<kDh, NJ - 1>(left, out, ldo, w, ldw, x, ldx, T, j0);
  }
}

// out (T, kDh; row stride ldo) = w (T, T; row stride ldw)^T x (T, kDh; row stride ldx), for
// head sizes of whole vectors: a head's dK = dS^T q and dV = P^T dO over all its rows.
template <int kDh>
void columns_times_x(float* out, int ldo, const float* w, int ldw, const float* x, int ldx,
                     int T) {
  constexpr int kAcc = HeadVec::kLanes == 16 ? 16 : 12;
  constexpr int kJ = std::max(1, kAcc / (kDh / HeadVec::kLanes));
  int j0 = 0;
  for (; j0 + kJ <= T; j0 += kJ) columns_times_x_block<kDh, kJ>(out, ldo, w, ldw, x, ldx, T, j0);
  if (j0 < T) columns_times_x_tail<kDh, kJ - 1>(T - j0, out, ldo, w, ldw, x, ldx, T, j0);
}
MINIVIT_INTRINSICS_END
#endif

}  // namespace attention_tiles
MINIVIT_ISA_END
}  // namespace minivit
