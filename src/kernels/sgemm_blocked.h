#pragma once
// The fp32 product of minivit's own kernels, written once for any vector width; an Isa
// (sgemm_avx512.cpp, sgemm_avx2.cpp) gives the vector type, its operations, the tile and
// the block sizes.
//
// The model's products are tall and thin: (B*T, 64..192) x (64..192, 64..192), and the
// weight gradients' (64..192, B*T) x (B*T, 64..192). Goto's scheme, cut down to them:
//   for each block of kKc reductions: pack that block of op(B) into panels of kNr columns
//     for each block of kMc rows of C: for each panel: for each kMr rows of the block:
//       one (kMr, kNr) tile of C, held in registers over the whole block of k.
// op(A) is read in place: a tile's rows are kMr streams along k (A), or one run of kMr
// floats per k (A^T); the prefetchers follow both, and at these widths a packed copy of A
// would cost about as much as the arithmetic it feeds.
// Each element of C sums its products in k order whatever the cut of the shape, so a
// product split across threads rounds exactly as one that is not.
#include <algorithm>
#include <cstdint>

#include "minivit/kernels/isa.h"
#include "tile_epilogue.h"

namespace minivit {
MINIVIT_ISA_BEGIN
namespace sgemm_blocked {

// Packs op(B)[k0:k0+kc, 0:N] into panels (ceil(N / kNr), kc, kNr), zero beyond column N.
// A transposed B (the linear layers' weights, (O, I) read as W^T) is turned in blocks of
// kLanes x kLanes in registers (Isa::transpose): element by element, the strided stores
// took as long as the product itself for a batch of one image.
template <class Isa>
void pack_b(bool trans_b, const float* B, int ldb, int k0, int kc, int N, float* packed) {
  constexpr int kNr = Isa::kLanes * Isa::kVecs, kLanes = Isa::kLanes;
  const int panels = (N + kNr - 1) / kNr;
  for (int p = 0; p < panels; ++p) {
    const int j0 = p * kNr, cols = std::min(kNr, N - j0);
    float* dst = packed + int64_t(p) * kc * kNr;
    if (!trans_b) {
      for (int k = 0; k < kc; ++k) {
        const float* src = B + int64_t(k0 + k) * ldb + j0;
        float* row = dst + k * kNr;
        int j = 0;
        for (; j < cols; ++j) row[j] = src[j];
        for (; j < kNr; ++j) row[j] = 0.0f;
      }
    } else {  // op(B)(k, j) = B[j * ldb + k]: read B's rows along k, write columns
      const int whole_cols = cols / kLanes * kLanes, whole_k = kc / kLanes * kLanes;
      for (int j = 0; j < whole_cols; j += kLanes) {
        const float* src = B + int64_t(j0 + j) * ldb + k0;
        for (int k = 0; k < whole_k; k += kLanes)
          Isa::transpose(src + k, ldb, dst + int64_t(k) * kNr + j, kNr);
        for (int jj = j; jj < j + kLanes; ++jj)
          for (int k = whole_k; k < kc; ++k) dst[k * kNr + jj] = B[int64_t(j0 + jj) * ldb + k0 + k];
      }
      int j = whole_cols;
      for (; j < cols; ++j) {
        const float* src = B + int64_t(j0 + j) * ldb + k0;
        for (int k = 0; k < kc; ++k) dst[k * kNr + j] = src[k];
      }
      for (; j < kNr; ++j)
        for (int k = 0; k < kc; ++k) dst[k * kNr + j] = 0.0f;
    }
  }
}

// The k of a block of kc that a tile sums over: all, or (kListed) the `count` listed in
// `used` (gemm's k_used), in order.
struct BlockSteps {
  int kc;
  const int* used = nullptr;
  int count = 0;
};

// C[0:kRows, 0:cols] = alpha * op(A)[0:kRows, 0:kc] . panel + beta * C, with op(A)(r, k)
// at a[k * lda + r] (kTransA) or a[r * lda + k], and the panel's row k at panel + k * ldp,
// summed over the block's steps. beta == 0 never reads C; ep adds the residual and the bias
// (tile_epilogue.h).
template <class Isa, int kRows, bool kTransA, bool kListed>
void tile(const float* a, int lda, const float* panel, int ldp, BlockSteps block, float* C,
          int ldc, int cols, float alpha, float beta, const TileEpilogue& ep) {
  constexpr int kVecs = Isa::kVecs, kLanes = Isa::kLanes;
  typename Isa::Vec acc[kRows][kVecs];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) acc[r][v] = Isa::zero();
  const int steps = kListed ? block.count : block.kc;
  for (int step = 0; step < steps; ++step) {
    const int k = kListed ? block.used[step] : step;
    typename Isa::Vec b[kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) b[v] = Isa::load(panel + int64_t(k) * ldp + kLanes * v);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const typename Isa::Vec ar =
          Isa::broadcast(kTransA ? a[int64_t(k) * lda + r] : a[int64_t(r) * lda + k]);
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) acc[r][v] = Isa::fma(ar, b[v], acc[r][v]);
    }
  }
  Isa::template store<kRows>(acc, C, ldc, cols, alpha, beta, ep);
  finish_tile<kRows>(C, ldc, cols, ep);
}

// The block's row k of op(A)'s transpose: a[k * lda + r] over r.
inline const float* block_row(const float* a, int lda, BlockSteps block, int step) {
  return a + int64_t(block.used ? block.used[step] : step) * lda;
}

// add_block_row_sums for kV whole vectors of rows, whose running sums stay in registers (an
// array indexed at run time lived on the stack, each k's add waiting on the last one's store).
template <class Isa, int kV>
void add_row_sums_in_registers(const float* a, int lda, BlockSteps block, float* sums) {
  typename Isa::Vec run[kV];
#pragma GCC unroll 16
  for (int v = 0; v < kV; ++v) run[v] = Isa::zero();
  const int steps = block.used ? block.count : block.kc;
  for (int step = 0; step < steps; ++step) {
    const float* a_k = block_row(a, lda, block, step);
#pragma GCC unroll 16
    for (int v = 0; v < kV; ++v) run[v] = Isa::add(run[v], Isa::load(a_k + Isa::kLanes * v));
  }
#pragma GCC unroll 16
  for (int v = 0; v < kV; ++v)
    Isa::store_vec(sums + Isa::kLanes * v, Isa::add(Isa::load(sums + Isa::kLanes * v), run[v]));
}

// add_row_sums_in_registers at `vecs` vectors, vecs <= kV.
template <class Isa, int kV>
void add_row_sums_of_vectors(int vecs, const float* a, int lda, BlockSteps block, float* sums) {
  if constexpr (kV >= 1) {
    if (vecs == kV) return add_row_sums_in_registers<Isa, kV>(a, lda, block, sums);
    return add_row_sums_of_vectors<Isa, kV - 1>(vecs, a, lda, block, sums);
  }
}

// sums[0:rows] += the block's sums of op(A)'s rows, op(A)(r, k) at a[k * lda + r]: each
// summed in k order from zero, then added on (gemm.h's a_row_sums). Taken while the tiles
// read the same (kMc, kc) slice of A from L1 and L2; a pass of its own read a weight
// gradient's dout from memory again. Whole vectors of rows in registers, the rest one by one.
template <class Isa, int kMc>
void add_block_row_sums(const float* a, int lda, int rows, BlockSteps block, float* sums) {
  constexpr int kLanes = Isa::kLanes;
  const int vecs = rows / kLanes, done = vecs * kLanes;
  add_row_sums_of_vectors<Isa, kMc / kLanes>(vecs, a, lda, block, sums);
  if (done == rows) return;
  float run[kLanes] = {};
  const int steps = block.used ? block.count : block.kc;
  for (int step = 0; step < steps; ++step) {
    const float* a_k = block_row(a, lda, block, step) + done;
    for (int r = 0; r < rows - done; ++r) run[r] += a_k[r];
  }
  for (int r = 0; r < rows - done; ++r) sums[done + r] += run[r];
}

// Tiles of Isa::kMr rows, and one of `rows` < kMr at the bottom edge.
template <class Isa, bool kTransA, bool kListed, int kRows = Isa::kMr>
void tile_rows(int rows, const float* a, int lda, const float* panel, int ldp, BlockSteps block,
               float* C, int ldc, int cols, float alpha, float beta, const TileEpilogue& ep) {
  if constexpr (kRows >= 1) {
    if (rows == kRows)
      return tile<Isa, kRows, kTransA, kListed>(a, lda, panel, ldp, block, C, ldc, cols, alpha,
                                                beta, ep);
    return tile_rows<Isa, kTransA, kListed, kRows - 1>(rows, a, lda, panel, ldp, block, C, ldc,
                                                       cols, alpha, beta, ep);
  }
}

// The rows of the next tile when `left` remain. A last tile of one row sums its few
// columns in dependent chains, at about a third of a whole tile's rate (a 49-token image
// left one of 6-row tiles), so kMr + 1 rows go as two tiles of about half.
template <int kMr>
constexpr int tile_height(int left) {
  return left == kMr + 1 ? (kMr + 2) / 2 : std::min(kMr, left);
}

template <class Isa, bool kTransA>
void sgemm(int M, int N, int K, float alpha, const float* A, int lda, bool trans_b,
           const float* B, int ldb, float beta, float* C, int ldc, const GemmEpilogue& epilogue,
           const uint8_t* k_used) {
  constexpr int kNr = Isa::kLanes * Isa::kVecs, kKc = Isa::kKc, kMc = Isa::kMc, kMr = Isa::kMr;
  static_assert(kKc == 128, "a_row_sums are summed in the blocks of k, 128 long (gemm.h)");
  if (K <= 0) {  // an empty sum: C = beta * C, as BLAS defines it, then the epilogue
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        float& c = C[int64_t(i) * ldc + j];
        c = beta == 0.0f ? 0.0f : beta * c;
        if (epilogue.residual) c = epilogue.residual[i * epilogue.ld_residual + j] + c;
        if (epilogue.bias) c = c + epilogue.bias[j];
      }
    if (epilogue.gelu)
      gelu_epilogue(epilogue.gelu, epilogue.ld_gelu, C, ldc, M, N, epilogue.gelu_slope);
    if (epilogue.scale) scale_epilogue(C, ldc, epilogue.scale, epilogue.ld_scale, M, N);
    return;
  }
  // A B whose rows are whole panels wide is already laid out as its panels, with a longer
  // stride: it is read in place (the weight gradients' B, B*T rows long, most of all).
  // Otherwise kPackPanels panels at a time are packed, their rows on cache lines. Each
  // element of C still sums its k blocks in order, so the cut into groups changes no bit.
  const bool in_place = !trans_b && N % kNr == 0;
  alignas(64) float packed[Isa::kPackPanels * kKc * kNr];
  const int panels = (N + kNr - 1) / kNr;
  const int group = in_place ? panels : Isa::kPackPanels;
  const int ldp = in_place ? ldb : kNr;

  int used[kKc];
  for (int k0 = 0; k0 < K; k0 += kKc) {
    const int kc = std::min(kKc, K - k0);
    const float block_beta = k0 == 0 ? beta : 1.0f;  // later blocks add to the first's sum
    const bool first_block = k0 == 0, last_block = k0 + kc >= K;
    // The blocks stay those of every k, so that each sum is cut where it would be without
    // k_used; inside one, the skipped terms are exact zeros.
    BlockSteps block{kc};
    if (k_used) {
      block.used = used;
      for (int k = 0; k < kc; ++k)
        if (k_used[k0 + k]) used[block.count++] = k;
    }
    for (int p0 = 0; p0 < panels; p0 += group) {
      const int p1 = std::min(panels, p0 + group);
      if (!in_place) {
        const int j_first = p0 * kNr;
        const float* b_first = trans_b ? B + int64_t(j_first) * ldb : B + j_first;
        pack_b<Isa>(trans_b, b_first, ldb, k0, kc, std::min(N, p1 * kNr) - j_first, packed);
      }
      for (int i0 = 0; i0 < M; i0 += kMc) {
        const int i1 = std::min(M, i0 + kMc);
        if constexpr (kTransA)
          if (epilogue.a_row_sums && p0 == 0)
            add_block_row_sums<Isa, kMc>(A + int64_t(k0) * lda + i0, lda, i1 - i0, block,
                                         epilogue.a_row_sums + i0);
        for (int p = p0; p < p1; ++p) {
          const int j0 = p * kNr, cols = std::min(kNr, N - j0);
          const float* panel =
              in_place ? B + int64_t(k0) * ldb + j0 : packed + int64_t(p - p0) * kc * kNr;
          for (int i = i0, rows = 0; i < i1; i += rows) {
            const float* a = kTransA ? A + int64_t(k0) * lda + i : A + int64_t(i) * lda + k0;
            rows = tile_height<kMr>(i1 - i);
            float* c = C + int64_t(i) * ldc + j0;
            const TileEpilogue ep = tile_epilogue(epilogue, i, j0, first_block, last_block);
            if (block.used)
              tile_rows<Isa, kTransA, true>(rows, a, lda, panel, ldp, block, c, ldc, cols, alpha,
                                            block_beta, ep);
            else
              tile_rows<Isa, kTransA, false>(rows, a, lda, panel, ldp, block, c, ldc, cols,
                                             alpha, block_beta, ep);
          }
        }
      }
    }
  }
}

// The entry point of a kernel set: op(A) transposed or not picks the tile's reads.
template <class Isa>
void sgemm_any(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
               int lda, const float* B, int ldb, float beta, float* C, int ldc,
               const GemmEpilogue& epilogue, const uint8_t* k_used) {
  if (trans_a)
    sgemm<Isa, true>(M, N, K, alpha, A, lda, trans_b, B, ldb, beta, C, ldc, epilogue, k_used);
  else
    sgemm<Isa, false>(M, N, K, alpha, A, lda, trans_b, B, ldb, beta, C, ldc, epilogue, k_used);
}

}  // namespace sgemm_blocked
MINIVIT_ISA_END
}  // namespace minivit
