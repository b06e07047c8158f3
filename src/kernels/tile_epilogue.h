#pragma once
// A product kernel's share of a GemmEpilogue (kernels/gemm.h) for one tile of C: where the
// tile's rows of the residual and its columns of the bias start, or null where this block of
// k adds nothing.
#include <cstdint>

#include "minivit/kernels/gemm.h"

namespace minivit {
MINIVIT_ISA_BEGIN

struct TileEpilogue {
  const float* bias = nullptr;      // the tile's first column of the bias
  const float* residual = nullptr;  // the tile's first element of the residual
  int64_t ld_residual = 0;
};

// The tile at row i, column j of C, in a block of k that is the first and/or the last: the
// residual and the bias after it join the last block's store, a bias alone the first's.
inline TileEpilogue tile_epilogue(const GemmEpilogue& e, int i, int j, bool first_block,
                                  bool last_block) {
  TileEpilogue t;
  if (e.residual) {
    if (!last_block) return t;
    t.residual = e.residual + i * e.ld_residual + j;
    t.ld_residual = e.ld_residual;
    if (e.bias) t.bias = e.bias + j;
  } else if (e.bias && first_block) {
    t.bias = e.bias + j;
  }
  return t;
}

MINIVIT_ISA_END
}  // namespace minivit
