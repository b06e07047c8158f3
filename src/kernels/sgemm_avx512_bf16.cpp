#include "minivit/kernels/sgemm_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "bf16_pairs.h"
#include "sgemm_tile_store.h"

namespace minivit {
MINIVIT_ISA_BEGIN

// The products of sgemm_avx512.cpp with their inputs rounded to bfloat16 and summed in
// fp32: VDPBF16PS multiplies 32 pairs of bf16 and adds each pair into one of 16 fp32 lanes,
// twice the multiply-adds of an FMA in the same time (234 against 117 GFLOP/s on one core
// of the Zen 4 in the README). The product of two bf16 is exact in fp32, so what is lost is
// the inputs' rounding (8 bits of mantissa), not the sums'.
//
// Both operands are packed as pairs along k, a pair in one 32-bit word (k even in the low
// half), so that one word of op(A) broadcast against a row of pairs of op(B) feeds one
// VDPBF16PS:
//   op(B): panels (ceil(N / kNr), kc / 2, kNr) of pairs, zero beyond column N;
//   op(A): a block of kMc rows, (rows, kc / 2) pairs, or (kc / 2, kMc) when A is transposed,
//          so that a tile reads its rows' words where the source has them next to each other.
// An odd k has a zero partner. Each element of C sums its pairs in k order whatever the
// cut of the shape, so a split across threads rounds as the whole product does.

namespace {

using namespace bf16_pairs;

constexpr int kMr = 6;            // rows of a C tile: 24 of the 32 zmm registers summing
constexpr int kVecs = 4;          // zmm registers across a row of the tile
constexpr int kNr = 16 * kVecs;   // columns of a C tile
constexpr int kKc = 256;          // reductions per packed block: a (kKc / 2, kNr) panel, 32 KB
constexpr int kMc = 96;           // rows of op(A) per packed block, 48 KB
constexpr int kPackPanels = 4;    // panels of op(B) packed at a time, 128 KB
static_assert(kKc % 128 == 0, "a_row_sums' runs of 128 k start inside a block");

// C[0:kRows, 0:cols] = alpha * op(A) . panel + beta * C over kp_count pairs, with op(A)'s
// pair (r, kp) at a[kp * lda + r] (kTransA) or a[r * lda + kp]. beta == 0 never reads C; ep
// adds the residual and the bias (tile_epilogue.h).
template <int kRows, bool kTransA>
void tile(const Pair* a, int lda, const Pair* panel, int kp_count, float* C, int ldc, int cols,
          float alpha, float beta, const TileEpilogue& ep) {
  __m512 acc[kRows][kVecs];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int kp = 0; kp < kp_count; ++kp) {
    __m512bh b[kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v)
      b[v] = __m512bh(_mm512_loadu_si512(panel + int64_t(kp) * kNr + 16 * v));
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const Pair word = kTransA ? a[int64_t(kp) * lda + r] : a[int64_t(r) * lda + kp];
      const __m512bh ar = __m512bh(_mm512_set1_epi32(int(word)));
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], ar, b[v]);
    }
  }
  store_tile<kRows, kVecs>(acc, C, ldc, cols, alpha, beta, ep);
  finish_tile<kRows>(C, ldc, cols, ep);
}

template <bool kTransA, int kRows = kMr>
void tile_rows(int rows, const Pair* a, int lda, const Pair* panel, int kp_count, float* C,
               int ldc, int cols, float alpha, float beta, const TileEpilogue& ep) {
  if constexpr (kRows >= 1) {
    if (rows == kRows)
      return tile<kRows, kTransA>(a, lda, panel, kp_count, C, ldc, cols, alpha, beta, ep);
    return tile_rows<kTransA, kRows - 1>(rows, a, lda, panel, kp_count, C, ldc, cols, alpha, beta,
                                         ep);
  }
}

// With kTransA, epilogue.a_row_sums takes op(A)'s row sums as op(A) is packed (gemm.h); the
// rows of a block of k are packed again for each group of panels, summed with the first.
template <bool kTransA>
void sgemm_blocked(int M, int N, int K, float alpha, const float* A, int lda, bool trans_b,
                   const float* B, int ldb, float beta, float* C, int ldc,
                   const GemmEpilogue& epilogue) {
  alignas(64) Pair packed_b[kPackPanels * (kKc / 2) * kNr];
  alignas(64) Pair packed_a[kMc * (kKc / 2)];
  const int panels = (N + kNr - 1) / kNr;
  for (int k0 = 0; k0 < K; k0 += kKc) {
    const int kc = std::min(kKc, K - k0), kp_count = (kc + 1) / 2;
    const float block_beta = k0 == 0 ? beta : 1.0f;  // later blocks add to the first's sum
    const bool first_block = k0 == 0, last_block = k0 + kc >= K;
    for (int p0 = 0; p0 < panels; p0 += kPackPanels) {
      const int p1 = std::min(panels, p0 + kPackPanels), j_first = p0 * kNr;
      const float* b_first = trans_b ? B + int64_t(j_first) * ldb : B + j_first;
      pack_b<kNr>(trans_b, b_first, ldb, k0, kc, std::min(N, p1 * kNr) - j_first, kp_count,
                  packed_b);
      for (int i0 = 0; i0 < M; i0 += kMc) {
        const int rows = std::min(kMc, M - i0);
        // op(A)[i0:i0+rows, k0:k0+kc] as pairs: (kp, row) when A is transposed, else (row, kp)
        const int lda_packed = kTransA ? kMc : kKc / 2;
        if (kTransA && epilogue.a_row_sums && p0 == 0)
          pack_pairs_from_rows<kMc, true>(A + int64_t(k0) * lda + i0, lda, kc, rows, packed_a,
                                          kMc, epilogue.a_row_sums + i0);
        else if (kTransA)
          pack_pairs_from_rows<kMc, false>(A + int64_t(k0) * lda + i0, lda, kc, rows, packed_a,
                                           kMc, nullptr);
        else
          pack_pairs_along_rows(A + int64_t(i0) * lda + k0, lda, rows, kc, packed_a, kKc / 2);
        for (int p = p0; p < p1; ++p) {
          const int j0 = p * kNr, cols = std::min(kNr, N - j0);
          const Pair* panel = packed_b + int64_t(p - p0) * kp_count * kNr;
          for (int i = 0; i < rows; i += kMr) {
            const Pair* a = kTransA ? packed_a + i : packed_a + int64_t(i) * lda_packed;
            tile_rows<kTransA>(
                std::min(kMr, rows - i), a, lda_packed, panel, kp_count,
                C + int64_t(i0 + i) * ldc + j0, ldc, cols, alpha, block_beta,
                tile_epilogue(epilogue, i0 + i, j0, first_block, last_block));
          }
        }
      }
    }
  }
}

}  // namespace

void sgemm_avx512_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                       const float* A, int lda, const float* B, int ldb, float beta, float* C,
                       int ldc, const GemmEpilogue& epilogue) {
  if (K <= 0)
    return sgemm_avx512(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, epilogue);
  if (trans_a)
    sgemm_blocked<true>(M, N, K, alpha, A, lda, trans_b, B, ldb, beta, C, ldc, epilogue);
  else
    sgemm_blocked<false>(M, N, K, alpha, A, lda, trans_b, B, ldb, beta, C, ldc, epilogue);
}

MINIVIT_ISA_END
}  // namespace minivit

