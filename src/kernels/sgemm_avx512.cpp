#include "minivit/kernels/sgemm_avx512.h"

#include <immintrin.h>

#include "minivit/kernels/transpose16.h"
#include "sgemm_blocked.h"
#include "sgemm_tile_store.h"

namespace minivit {
MINIVIT_ISA_BEGIN

namespace {

// A (6, 64) tile keeps 24 of the 32 zmm registers summing and needs 4 loads of B and 6
// broadcasts of A per 24 FMAs. Measured on one core of the machine in the README, against
// (8, 32), (12, 32), (14, 32), (7, 64), (4, 64) and (8, 48) tiles and other block sizes,
// on the model's products: 170-200 GFLOP/s, twice OpenBLAS's AVX2 kernels.
// Products of at most 32 columns (the conv stem's first stage and its weight gradient, the
// classifier) take (12, 32) tiles: in a 64-column panel half or more of the FMAs would sum
// zero columns. Each element of C still sums its k in the same order, so the bits are those
// of the wide tiles.
template <int kRowsOfTile, int kVecsAcross>
struct Avx512Tiles {
  using Vec = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kMr = kRowsOfTile;   // rows of a C tile
  static constexpr int kVecs = kVecsAcross; // zmm registers across a row of the tile
  static constexpr int kKc = 128;    // reductions per packed block: a (kKc, 64) panel is 32 KB
  static constexpr int kMc = 96;     // rows per block: their (kMc, kKc) slice of A stays in L2
  // Panels of op(B) packed at a time: the (kKc, 4 * 64) block, 128 KB, lives on the stack of
  // the call, so the kernels keep no buffer between calls. Four hold the widest product of a
  // dim-64 model (qkv, 3 panels) in one go, so its loops run as with the whole B packed.
  static constexpr int kPackPanels = 4;

  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static Vec broadcast(float x) { return _mm512_set1_ps(x); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static void store_vec(float* p, Vec v) { _mm512_storeu_ps(p, v); }

  // dst (16, 16), row stride ldd = the transpose of src (16, 16), row stride lds.
  static void transpose(const float* src, int64_t lds, float* dst, int64_t ldd) {
    __m512 r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
    transpose16(r);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * ldd, r[i]);
  }
  template <int kRows>
  [[gnu::always_inline]] static void store(const Vec (&acc)[kRows][kVecs], float* C, int ldc,
                                           int cols, float alpha, float beta,
                                           const TileEpilogue& ep) {
    store_tile<kRows, kVecs>(acc, C, ldc, cols, alpha, beta, ep);
  }
};

using Avx512 = Avx512Tiles<6, 4>;
using Avx512Narrow = Avx512Tiles<12, 2>;

}  // namespace

void sgemm_avx512(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                  int lda, const float* B, int ldb, float beta, float* C, int ldc,
                  const GemmEpilogue& epilogue, const uint8_t* k_used) {
  if (N <= 16 * Avx512Narrow::kVecs)
    return sgemm_blocked::sgemm_any<Avx512Narrow>(trans_a, trans_b, M, N, K, alpha, A, lda, B,
                                                  ldb, beta, C, ldc, epilogue, k_used);
  sgemm_blocked::sgemm_any<Avx512>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                                   ldc, epilogue, k_used);
}

MINIVIT_ISA_END
}  // namespace minivit

