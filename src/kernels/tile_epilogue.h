#pragma once
// A product kernel's share of a GemmEpilogue (kernels/gemm.h) for one tile of C: where the
// tile's rows of the residual and of GELU(C) and its columns of the bias start, or null
// where this block of k adds nothing; and the GELU pass over a finished piece of C, which
// the AVX512_BF16 kernel runs on each tile while it is in L1, and gemm() on its part of C
// after the fp32 kernels and around the kernels that store C themselves.
#include <cstdint>

#include "minivit/kernels/gemm.h"
#include "minivit/kernels/vecmath.h"

namespace minivit {
MINIVIT_ISA_BEGIN

struct TileEpilogue {
  const float* bias = nullptr;      // the tile's first column of the bias
  const float* residual = nullptr;  // the tile's first element of the residual
  int64_t ld_residual = 0;
  float* gelu = nullptr;            // the tile's first element of GELU(C)
  int64_t ld_gelu = 0;
  bool gelu_slope = false;          // C keeps GELU's slope (GemmEpilogue)
  const float* scale = nullptr;     // the tile's first element of the scale
  int64_t ld_scale = 0;
};

// The tile at row i, column j of C, in a block of k that is the first and/or the last: the
// residual, the bias after it and the GELU join the last block's store, a bias alone the
// first's.
inline TileEpilogue tile_epilogue(const GemmEpilogue& e, int i, int j, bool first_block,
                                  bool last_block) {
  TileEpilogue t;
  if (e.bias && !e.residual && first_block) t.bias = e.bias + j;
  if (!last_block) return t;
  if (e.residual) {
    t.residual = e.residual + i * e.ld_residual + j;
    t.ld_residual = e.ld_residual;
    if (e.bias) t.bias = e.bias + j;
  }
  if (e.gelu)
    t.gelu = e.gelu + i * e.ld_gelu + j, t.ld_gelu = e.ld_gelu, t.gelu_slope = e.gelu_slope;
  if (e.scale) t.scale = e.scale + i * e.ld_scale + j, t.ld_scale = e.ld_scale;
  return t;
}

// The GELU epilogue on C[0:rows, 0:cols], whose bias and residual are in: GELU(C) into gelu,
// and with slope GELU's slope into C. simdlen(16) as in nn/gelu.cpp, so that each element
// rounds as there.
inline void gelu_epilogue(float* gelu, int64_t ld_gelu, float* C, int64_t ldc, int rows,
                          int cols, bool slope) {
  for (int r = 0; r < rows; ++r) {
    float* c = C + r * ldc;
    float* y = gelu + r * ld_gelu;
    if (slope) {
      gelu_and_slope(y, c, cols);
    } else {
#pragma omp simd simdlen(16)
      for (int j = 0; j < cols; ++j) y[j] = gelu_inline(c[j]);
    }
  }
}

// C[0:rows, 0:cols] = 0 + C * scale, element by element, for the kernels that store C as it
// is; contracted to one FMA with a zero addend where the level has FMA, as the fused stores
// compute it.
inline void scale_epilogue(float* C, int64_t ldc, const float* scale, int64_t ld_scale, int rows,
                           int cols) {
  for (int r = 0; r < rows; ++r) {
    float* c = C + r * ldc;
    const float* s = scale + r * ld_scale;
#pragma omp simd
    for (int j = 0; j < cols; ++j) c[j] = 0.0f + c[j] * s[j];
  }
}

// The GELU of a stored tile. The kernels' stores take the scale themselves, as one more FMA
// on each vector before it leaves the registers, where a pass here read C back.
template <int kRows>
inline void finish_tile(float* C, int ldc, int cols, const TileEpilogue& ep) {
  if (ep.gelu) gelu_epilogue(ep.gelu, ep.ld_gelu, C, ldc, kRows, cols, ep.gelu_slope);
}

MINIVIT_ISA_END
}  // namespace minivit
