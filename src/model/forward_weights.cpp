// The forward weights (vit.h): the linear layers' (O, I) weights transposed into acts'
// *_w_t buffers, compiled once per instruction-set level (kernels/isa.h).
#include <algorithm>

#include "minivit/kernels/threads.h"
#include "minivit/model/vit.h"

#if defined(__AVX512F__)
#include <immintrin.h>

#include "minivit/kernels/transpose16.h"
MINIVIT_INTRINSICS_BEGIN
#endif

namespace minivit {
MINIVIT_ISA_BEGIN

namespace {

// dst (cols, rows) = src (rows, cols) transposed, in tiles of 16 x 16 that both keep in L1.
// On AVX-512 a whole tile turns in registers: element by element, the strided stores took
// 0.6% of a one-thread CIFAR-10 training run, against 0.4% so.
void transpose_into(float* dst, const float* src, int rows, int cols) {
  constexpr int kTile = 16;
  for (int r0 = 0; r0 < rows; r0 += kTile)
    for (int c0 = 0; c0 < cols; c0 += kTile) {
      const int r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
#if defined(__AVX512F__)
      if (r1 - r0 == kTile && c1 - c0 == kTile) {
        __m512 tile[kTile];
        for (int r = 0; r < kTile; ++r)
          tile[r] = _mm512_loadu_ps(src + int64_t(r0 + r) * cols + c0);
        transpose16(tile);
        for (int c = 0; c < kTile; ++c)
          _mm512_storeu_ps(dst + int64_t(c0 + c) * rows + r0, tile[c]);
        continue;
      }
#endif
      for (int r = r0; r < r1; ++r)
        for (int col = c0; col < c1; ++col)
          dst[int64_t(col) * rows + r] = src[int64_t(r) * cols + col];
    }
}

}  // namespace

void make_forward_weights(const ViT& model, Activations& acts) {
  if (!acts.reads_weight_transposes()) return;
  const ModelConfig& c = model.config;
  const ViTParams& w = model.w;
  const int stages = c.stem_stages(), D = c.dim, M = c.mlp_dim;
  struct Matrix {
    float* dst;
    const float* src;
    int rows, cols;  // of src, (O, I)
  };
  // The projection, each stem stage, then each block's four.
  auto matrix = [&](int64_t i) -> Matrix {
    if (i == 0) return {acts.patch_w_t, w.patch_w, D, c.patch_len()};
    if (i <= stages) {
      const int s = int(i - 1);
      return {acts.stem[size_t(s)].weight_t, w.stem[size_t(s)].weight, c.stem_out(s),
              9 * c.stem_in(s)};
    }
    const int64_t j = i - 1 - stages;
    const BlockParams& bw = w.blocks[size_t(j / 4)];
    const BlockActivations& a = acts.blocks[size_t(j / 4)];
    switch (j % 4) {
      case 0: return {a.qkv_w_t, bw.qkv_w, 3 * D, D};
      case 1: return {a.proj_w_t, bw.proj_w, D, D};
      case 2: return {a.fc1_w_t, bw.fc1_w, M, D};
      default: return {a.fc2_w_t, bw.fc2_w, D, M};
    }
  };
  const int64_t count = 1 + stages + 4 * int64_t(c.depth);
  const bool split = int64_t(c.depth) * (4 * D + 2 * M) * D > (1 << 16);
  for_ranges(count, split, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const Matrix m = matrix(i);
      transpose_into(m.dst, m.src, m.rows, m.cols);
    }
  });
}

MINIVIT_ISA_END
}  // namespace minivit

#if defined(__AVX512F__)
MINIVIT_INTRINSICS_END
#endif
