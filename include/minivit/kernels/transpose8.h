#pragma once
// 8 x 8 floats transposed in ymm registers: pairs of lanes, pairs of pairs, then 128-bit
// halves. transpose16.h's method at the AVX2 level: the product kernels pack transposed
// operands with it, and the attention core turns K into K^T. Builds for AVX2.
#if defined(__AVX2__)
#include <immintrin.h>

#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN

// r (8 rows of 8) becomes its transpose.
inline void transpose8(__m256 (&r)[8]) {
  __m256 t[8];
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    t[j] = _mm256_permute2f128_ps(r[j], r[4 + j], 0x20);
    t[4 + j] = _mm256_permute2f128_ps(r[j], r[4 + j], 0x31);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = t[i];
}

MINIVIT_ISA_END
}  // namespace minivit
#endif
