#pragma once
// Packing for the bf16 product kernels (AVX512_BF16's VDPBF16PS and AMX's TDPBF16PS), which
// both take bf16 in pairs along k, a pair in one 32-bit word (k even in the low half).
// Needs AVX512_BF16 in the build: the files that include it test for it first.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN
namespace bf16_pairs {

using Pair = uint32_t;  // two bf16: op(X)(., k) in the low half, op(X)(., k + 1) in the high

// Pairs (x[j], y[j]) for 16 columns, x[j] in the low half: two rows of a row-major source,
// rounded to bf16 (x then y in the 32 halves) and interleaved.
inline __m512i pair_rows(__m512 x, __m512 y) {
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10,
                                              25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3,
                                              18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(interleave, __m512i(_mm512_cvtne2ps_pbh(y, x)));
}

// dst[kp * ld_dst + j] = pair(src(2kp, j), src(2kp + 1, j)) for j < cols, kp < ceil(kc / 2),
// where src(k, j) = src[k * ld_src + j], and zero in columns [cols, kWidth). With kSum, also
// adds each column's sum over k into sums[j], j < cols, as gemm.h's a_row_sums asks: every
// run of 128 k from src's first row (a multiple of 128 in the whole product) summed in order
// from zero, then added on. The runs' sums stay in registers, kWidth / 16 of them, across
// the whole block.
template <int kWidth, bool kSum>
inline void pack_pairs_from_rows(const float* src, int64_t ld_src, int kc, int cols, Pair* dst,
                                 int ld_dst, float* sums) {
  constexpr int kVecs = kWidth / 16, kRun = 128;
  static_assert(kWidth % 16 == 0);
  __mmask16 in[kVecs];
  __m512 run[kVecs];
#pragma GCC unroll 8
  for (int v = 0; v < kVecs; ++v) {
    in[v] = __mmask16((1u << std::clamp(cols - 16 * v, 0, 16)) - 1);
    run[v] = _mm512_setzero_ps();
  }
  const int kp_count = (kc + 1) / 2;
  for (int kp = 0; kp < kp_count; ++kp) {
    const float* even = src + int64_t(2 * kp) * ld_src;
    const float* odd = even + ld_src;
    const bool has_odd = 2 * kp + 1 < kc;
    Pair* row = dst + int64_t(kp) * ld_dst;
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) {
      const __m512 x = _mm512_maskz_loadu_ps(in[v], even + 16 * v);
      const __m512 y = has_odd ? _mm512_maskz_loadu_ps(in[v], odd + 16 * v) : _mm512_setzero_ps();
      _mm512_storeu_si512(row + 16 * v, pair_rows(x, y));
      if constexpr (kSum) {
        run[v] = _mm512_add_ps(run[v], x);
        if (has_odd) run[v] = _mm512_add_ps(run[v], y);
      }
    }
    if constexpr (kSum) {
      if ((2 * kp + 2) % kRun == 0 || kp + 1 == kp_count) {
#pragma GCC unroll 8
        for (int v = 0; v < kVecs; ++v) {
          float* s = sums + 16 * v;
          _mm512_mask_storeu_ps(s, in[v], _mm512_add_ps(_mm512_maskz_loadu_ps(in[v], s), run[v]));
          run[v] = _mm512_setzero_ps();
        }
      }
    }
  }
}

// dst[i * ld_dst + kp] = pair(src[i * ld_src + 2kp], src[i * ld_src + 2kp + 1]) for i < rows:
// a source whose k runs along its rows already holds each pair side by side.
inline void pack_pairs_along_rows(const float* src, int64_t ld_src, int rows, int kc, Pair* dst,
                           int ld_dst) {
  for (int i = 0; i < rows; ++i) {
    const float* s = src + int64_t(i) * ld_src;
    Pair* d = dst + int64_t(i) * ld_dst;
    for (int k = 0; k < kc; k += 32) {
      const int n = std::min(32, kc - k);
      const __mmask16 lo = __mmask16((1u << std::min(n, 16)) - 1);
      const __mmask16 hi = __mmask16((1u << std::clamp(n - 16, 0, 16)) - 1);
      const __m512 x = _mm512_maskz_loadu_ps(lo, s + k);
      const __m512 y = _mm512_maskz_loadu_ps(hi, s + k + 16);
      // bf16 k..k+31 in order: 16 words, each an even k and the odd after it
      const __m512i words = __m512i(_mm512_cvtne2ps_pbh(y, x));
      _mm512_mask_storeu_epi32(d + k / 2, __mmask16((1u << ((n + 1) / 2)) - 1), words);
    }
  }
}

// Packs op(B)[k0:k0+kc, 0:N] (kc <= 256) into panels (ceil(N / kNr), panel_rows, kNr) of pairs,
// panel_rows >= ceil(kc / 2), zero beyond column N and beyond kc: the AVX512_BF16 kernel reads
// exactly ceil(kc / 2) rows, the AMX one whole tiles of 16.
template <int kNr>
inline void pack_b(bool trans_b, const float* B, int ldb, int k0, int kc, int N, int panel_rows,
                   Pair* packed) {
  const int panels = (N + kNr - 1) / kNr, kp_count = (kc + 1) / 2;
  for (int p = 0; p < panels; ++p) {
    const int j0 = p * kNr, cols = std::min(kNr, N - j0);
    Pair* dst = packed + int64_t(p) * panel_rows * kNr;
    if (!trans_b) {
      pack_pairs_from_rows<kNr, false>(B + int64_t(k0) * ldb + j0, ldb, kc, cols, dst, kNr,
                                       nullptr);
    } else {  // op(B)(k, j) = B[j * ldb + k]: column j's pairs lie along B's row j
      alignas(64) Pair column[128];
      for (int j = 0; j < kNr; ++j) {
        if (j < cols) pack_pairs_along_rows(B + int64_t(j0 + j) * ldb + k0, ldb, 1, kc, column, 0);
        for (int kp = 0; kp < kp_count; ++kp)
          dst[int64_t(kp) * kNr + j] = j < cols ? column[kp] : 0;
      }
    }
    std::fill(dst + int64_t(kp_count) * kNr, dst + int64_t(panel_rows) * kNr, Pair(0));
  }
}

}  // namespace bf16_pairs
MINIVIT_ISA_END
}  // namespace minivit
