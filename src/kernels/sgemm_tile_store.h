#pragma once
// The end of a product kernel's tile, shared by the fp32 and bf16 kernels:
// C[0:kRows, 0:cols] = alpha * acc + beta * C (+ residual) (+ bias), then 0 + C * scale,
// where beta == 0 never reads C.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "minivit/kernels/isa.h"
#include "tile_epilogue.h"

namespace minivit {
MINIVIT_ISA_BEGIN

// Always inlined, as the kernels' stores must be, and its rows unrolled: called, it takes the
// accumulators' address, and indexing them in a loop does as much; GCC 12 then writes every
// one of them to the stack at every step of k of the tile's loop, one store per FMA, at about
// half the tile's rate (tests/cpu/check_tiles_in_registers.py).
template <int kRows, int kVecs>
[[gnu::always_inline]] inline void store_tile(const __m512 (&acc)[kRows][kVecs], float* C,
                                              int ldc, int cols, float alpha, float beta,
                                              const TileEpilogue& ep) {
  // Lanes of C to touch in each 16-column vector: all, some or none.
  __mmask16 mask[kVecs];
#pragma GCC unroll 4
  for (int v = 0; v < kVecs; ++v) {
    const int in = std::clamp(cols - 16 * v, 0, 16);
    mask[v] = __mmask16((1u << in) - 1);
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  __m512 bias[kVecs];
#pragma GCC unroll 4
  for (int v = 0; v < kVecs; ++v)
    bias[v] = ep.bias ? _mm512_maskz_loadu_ps(mask[v], ep.bias + 16 * v) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
    float* c = C + int64_t(r) * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) {
      __m512 out = _mm512_mul_ps(va, acc[r][v]);
      if (beta != 0.0f) out = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask[v], c + 16 * v), out);
      if (ep.residual)
        out = _mm512_add_ps(
            _mm512_maskz_loadu_ps(mask[v], ep.residual + int64_t(r) * ep.ld_residual + 16 * v),
            out);
      if (ep.bias) out = _mm512_add_ps(out, bias[v]);
      if (ep.scale)
        out = _mm512_fmadd_ps(
            out, _mm512_maskz_loadu_ps(mask[v], ep.scale + int64_t(r) * ep.ld_scale + 16 * v),
            _mm512_setzero_ps());
      _mm512_mask_storeu_ps(c + 16 * v, mask[v], out);
    }
  }
}

MINIVIT_ISA_END
}  // namespace minivit
