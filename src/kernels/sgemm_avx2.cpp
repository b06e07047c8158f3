#include "minivit/kernels/sgemm_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "minivit/kernels/transpose8.h"
#include "sgemm_blocked.h"

namespace minivit {
MINIVIT_ISA_BEGIN

namespace {

// The AVX-512 kernels' scheme on 8-lane ymm registers, for CPUs without AVX-512 (Zen 2,
// Zen 3, Haswell to Alder Lake). A (6, 16) tile keeps 12 of the 16 ymm registers summing,
// with 2 for the row of B and 1 for the broadcast of A: 8 loads per 12 FMAs. On a 2-core
// Zen 3 a short `train` with 70% of the patches dropped took 8% less time than on OpenBLAS's
// Zen kernels (the median of seven pairs; README, Performance). Where
// OpenBLAS packs both operands on every call and, inside the batch's parallel chunks, runs
// its thread-count-independent cut piece by piece, these read A in place and take the
// product whole. B too is read in place where its rows are whole panels (sgemm_blocked.h):
// packing every B measured 961-1063 training img/s against 991-1109 (two threads, five
// rounds alternating).
struct Avx2 {
  using Vec = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kMr = 6;       // rows of a C tile
  static constexpr int kVecs = 2;     // ymm registers across a row of the tile: 16 columns
  static constexpr int kKc = 128;     // reductions per packed block: a (kKc, 16) panel is 8 KB
  static constexpr int kMc = 96;      // rows per block: their (kMc, kKc) slice of A stays in L2
  static constexpr int kPackPanels = 16;  // the (kKc, 16 * 16) block on the stack, 128 KB

  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static Vec broadcast(float x) { return _mm256_set1_ps(x); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static void store_vec(float* p, Vec v) { _mm256_storeu_ps(p, v); }

  // dst (8, 8), row stride ldd = the transpose of src (8, 8), row stride lds.
  static void transpose(const float* src, int64_t lds, float* dst, int64_t ldd) {
    __m256 r[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
    transpose8(r);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + i * ldd, r[i]);
  }

  // The tile's store with the parts of the epilogue it adds fixed (kBeta: beta != 0), or,
  // with kTested, each part tested at every vector. On a Zen 3 those tests cost a product of
  // K = 64 with none of the parts 4-5% (bench's sgemm line), so the products' usual mixes of
  // parts get a copy each (store, below). kMasked: only the lanes `mask` marks are read and
  // written, for a ragged right edge; whole rows of 16 are stored plainly, as masked stores
  // are slow on some of these CPUs.
  template <int kRows, bool kBeta, bool kResidual, bool kBias, bool kScale, bool kTested = false,
            bool kMasked = false>
  [[gnu::always_inline]] static void store_parts(const Vec (&acc)[kRows][kVecs], float* C,
                                                 int ldc, float alpha, float beta,
                                                 const TileEpilogue& ep,
                                                 const __m256i (&mask)[kVecs] = {}) {
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    const bool beta_on = kTested ? beta != 0.0f : kBeta;
    const bool residual_on = kTested ? ep.residual != nullptr : kResidual;
    const bool bias_on = kTested ? ep.bias != nullptr : kBias;
    const bool scale_on = kTested ? ep.scale != nullptr : kScale;
    auto load = [&](const float* p, int v) {
      return kMasked ? _mm256_maskload_ps(p, mask[v]) : _mm256_loadu_ps(p);
    };
    __m256 bias[kVecs];
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v)
      bias[v] = bias_on ? load(ep.bias + kLanes * v, v) : _mm256_setzero_ps();
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      float* c = C + int64_t(r) * ldc;
#pragma GCC unroll 2
      for (int v = 0; v < kVecs; ++v) {
        __m256 out = _mm256_mul_ps(va, acc[r][v]);
        if (beta_on) out = _mm256_fmadd_ps(vb, load(c + kLanes * v, v), out);
        if (residual_on)
          out = _mm256_add_ps(load(ep.residual + int64_t(r) * ep.ld_residual + kLanes * v, v),
                              out);
        if (bias_on) out = _mm256_add_ps(out, bias[v]);
        if (scale_on)
          out = _mm256_fmadd_ps(out, load(ep.scale + int64_t(r) * ep.ld_scale + kLanes * v, v),
                                _mm256_setzero_ps());
        if constexpr (kMasked)
          _mm256_maskstore_ps(c + kLanes * v, mask[v], out);
        else
          _mm256_storeu_ps(c + kLanes * v, out);
      }
    }
  }

  // C = alpha * acc + beta * C (+ residual) (+ bias), then times the scale, over the tile's
  // first `cols` columns; beta == 0 never reads C. Inlined, with the rows unrolled, for the
  // reason store_tile is (sgemm_tile_store.h).
  template <int kRows>
  [[gnu::always_inline]] static void store(const Vec (&acc)[kRows][kVecs], float* C, int ldc,
                                           int cols, float alpha, float beta,
                                           const TileEpilogue& ep) {
    using on = std::true_type;
    using off = std::false_type;
    if (cols == kLanes * kVecs) {
      const bool b = beta != 0.0f, res = ep.residual, bias = ep.bias, scale = ep.scale;
      auto whole = [&](auto... parts) {
        store_parts<kRows, decltype(parts)::value...>(acc, C, ldc, alpha, beta, ep);
      };
      if (!res && !bias && !scale)  // weight and input gradients, the sgemm line
        return b ? whole(on{}, off{}, off{}, off{}) : whole(off{}, off{}, off{}, off{});
      if (!b && !res && bias && !scale) return whole(off{}, off{}, on{}, off{});  // qkv, fc1
      if (res && bias && !scale)  // the blocks' output products, with their residual
        return b ? whole(on{}, on{}, on{}, off{}) : whole(off{}, on{}, on{}, off{});
      if (!b && !res && !bias && scale) return whole(off{}, off{}, off{}, on{});  // GELU's slope
      return whole(off{}, off{}, off{}, off{}, on{});  // the rest, tested
    }
    __m256i mask[kVecs];  // lanes of C to touch in each vector: all, some or none
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int v = 0; v < kVecs; ++v)
      mask[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(std::clamp(cols - kLanes * v, 0, kLanes)),
                                   lane);
    store_parts<kRows, false, false, false, false, true, true>(acc, C, ldc, alpha, beta, ep,
                                                                mask);
  }
};

}  // namespace

void sgemm_avx2(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                int lda, const float* B, int ldb, float beta, float* C, int ldc,
                const GemmEpilogue& epilogue, const uint8_t* k_used) {
  sgemm_blocked::sgemm_any<Avx2>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                                 epilogue, k_used);
}

MINIVIT_ISA_END
}  // namespace minivit

