#include "minivit/kernels/sgemm_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "bf16_pairs.h"

// GCC 12's unpack intrinsics merge into a deliberately undefined vector, which its
// -Wmaybe-uninitialized reports as a read of an uninitialised variable at every inlined use.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace minivit {
MINIVIT_ISA_BEGIN

// The bf16 products of sgemm_avx512_bf16.cpp on AMX tiles: one TDPBF16PS multiplies a
// (16, 32) bf16 tile of op(A) by a (32, 16) one of op(B) into a (16, 16) fp32 tile of C,
// 8192 multiply-adds, where VDPBF16PS does 512. On these thin products the arithmetic then
// costs less than rounding the inputs to bf16 and storing C, which is what the blocking
// below saves: every element of op(A) is rounded once per block of k, and C is read and
// written once per block of k.
//
// Operands, as pairs along k (bf16_pairs.h), zero beyond the matrix in k and in columns:
//   op(B): panels (ceil(N / kNr), kKc / 2, kNr): a B tile is 16 pair rows of 16 columns;
//   op(A): a block of kMc rows, (kMc, kKc / 2): an A tile is 16 rows of 16 pairs.
// A C block is 2 x 2 tiles, (32, 32), summed in the tile registers over a block of k.
// Each element of C sums its pairs in k order whatever the cut of the shape, so a split
// across threads rounds as the whole product does.

namespace {

using namespace bf16_pairs;

constexpr int kTile = 16;            // rows of every tile, and fp32 columns of a C tile
constexpr int kTilePairs = 16;       // pairs along k in one A tile row (one B tile's rows)
constexpr int kBlock = 2 * kTile;    // rows and columns of a C block
constexpr int kNr = 2 * kBlock;      // columns of a packed panel of op(B)
constexpr int kKc = 256;             // reductions per packed block: a panel is 32 KB
constexpr int kKp = kKc / 2;         // pairs per packed block
constexpr int kMc = 3 * kBlock;      // rows of op(A) per packed block, 48 KB
constexpr int kPackPanels = 4;       // panels of op(B) packed at a time, 128 KB

// Tile registers: 0-3 the C block (row-major 2 x 2), 4-5 its two A tiles, 6-7 its two B tiles.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

void load_tile_config() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = kTile;
    config.bytes_per_row[t] = 64;  // 16 fp32 of C, 16 pairs of A or 16 pair columns of B
  }
  _tile_loadconfig(&config);
}

// Transposes a 16 x 16 matrix of 32-bit words held one row a register.
inline void transpose_words(__m512i (&r)[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {  // within 128-bit lanes: (r0[0] r1[0] r0[1] r1[1]), ...
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 4; ++g) {  // r[4g + c], lane L: column 4L + c of rows 4g .. 4g + 3
    r[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    r[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    r[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    r[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // a 4 x 4 transpose of 128-bit lanes for each c
    const __m512i u0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88);
    const __m512i u1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xdd);
    const __m512i u2 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88);
    const __m512i u3 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xdd);
    t[c] = _mm512_shuffle_i32x4(u0, u2, 0x88);
    t[8 + c] = _mm512_shuffle_i32x4(u0, u2, 0xdd);
    t[4 + c] = _mm512_shuffle_i32x4(u1, u3, 0x88);
    t[12 + c] = _mm512_shuffle_i32x4(u1, u3, 0xdd);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// dst[j * ld_dst + kp] = pair(src(2kp, j), src(2kp + 1, j)) for j < cols, kp < kp_pad (zero
// from ceil(kc / 2)), where src(k, j) = src[k * ld_src + j]: an op(A) = A^T block, whose
// rows of A run along k. Sixteen pairs of rows of A at a time, transposed in registers.
// With sums, also adds each column's sum over k into sums[j] as gemm.h's a_row_sums asks
// (and add_a_row_sums in gemm.cpp does): every run of 128 k from src's first row, a multiple
// of 128 in the whole product, summed in order from zero with k_used's unused k skipped, then
// added on.
void pack_pairs_from_rows_transposed(const float* src, int64_t ld_src, int kc, int kp_pad,
                                     int cols, Pair* dst, int ld_dst, float* sums,
                                     const uint8_t* k_used) {
  constexpr int kRun = 128;
  auto used = [k_used, kc](int k) { return k < kc && (!k_used || k_used[k]); };
  for (int j = 0; j < cols; j += 16) {
    const int n = std::min(cols - j, 16);
    const __mmask16 in = __mmask16((1u << n) - 1);
    __m512 run = _mm512_setzero_ps();
    for (int kp0 = 0; kp0 < kp_pad; kp0 += 16) {
      __m512i words[16];
      for (int t = 0; t < 16; ++t) {
        const int k = 2 * (kp0 + t);
        const float* even = src + int64_t(k) * ld_src + j;
        const __m512 x = k < kc ? _mm512_maskz_loadu_ps(in, even) : _mm512_setzero_ps();
        const __m512 y = k + 1 < kc ? _mm512_maskz_loadu_ps(in, even + ld_src) : _mm512_setzero_ps();
        words[t] = pair_rows(x, y);
        if (!sums || k >= kc) continue;
        if (used(k)) run = _mm512_add_ps(run, x);
        if (used(k + 1)) run = _mm512_add_ps(run, y);
        if ((k + 2) % kRun == 0 || k + 2 >= kc) {
          float* s = sums + j;
          _mm512_mask_storeu_ps(s, in, _mm512_add_ps(_mm512_maskz_loadu_ps(in, s), run));
          run = _mm512_setzero_ps();
        }
      }
      transpose_words(words);
      for (int r = 0; r < n; ++r) _mm512_storeu_si512(dst + int64_t(j + r) * ld_dst + kp0, words[r]);
    }
  }
}

// Packs op(A)[i0:i0+rows, k0:k0+kc] as (rows, kp_pad) pairs with row stride kKp, zero beyond
// kc, and zero rows up to the next C block so that its tiles read no stale pairs. A
// transposed may add its rows' sums over these k into sums (rows), k_used from k0.
void pack_a(bool trans_a, const float* A, int lda, int i0, int rows, int k0, int kc, int kp_pad,
            Pair* packed, float* sums, const uint8_t* k_used) {
  const int kp_count = (kc + 1) / 2;
  if (trans_a) {
    pack_pairs_from_rows_transposed(A + int64_t(k0) * lda + i0, lda, kc, kp_pad, rows, packed, kKp,
                                    sums, k_used ? k_used + k0 : nullptr);
  } else {
    pack_pairs_along_rows(A + int64_t(i0) * lda + k0, lda, rows, kc, packed, kKp);
    for (int i = 0; i < rows; ++i)
      std::memset(packed + int64_t(i) * kKp + kp_count, 0, sizeof(Pair) * (kp_pad - kp_count));
  }
  const int padded_rows = std::min(kMc, (rows + kBlock - 1) / kBlock * kBlock);
  std::memset(packed + int64_t(rows) * kKp, 0, sizeof(Pair) * (padded_rows - rows) * kKp);
}

// GCC's _tile_loadd does not tell the compiler that it reads memory (its _tile_stored says
// it writes), so stores into a buffer that only tile loads read could be dropped or moved
// after them; this barrier keeps them before the loads.
inline void tile_loads_follow_stores() { asm volatile("" ::: "memory"); }

// Tile registers 0-3 from, or to, a (32, 32) fp32 block at c with rows ld floats apart.
inline void load_c_tiles(const float* c, int64_t ld) {
  tile_loads_follow_stores();
  _tile_loadd(0, c, ld * sizeof(float));
  _tile_loadd(1, c + kTile, ld * sizeof(float));
  _tile_loadd(2, c + kTile * ld, ld * sizeof(float));
  _tile_loadd(3, c + kTile * ld + kTile, ld * sizeof(float));
}

inline void store_c_tiles(float* c, int64_t ld) {
  _tile_stored(0, c, ld * sizeof(float));
  _tile_stored(1, c + kTile, ld * sizeof(float));
  _tile_stored(2, c + kTile * ld, ld * sizeof(float));
  _tile_stored(3, c + kTile * ld + kTile, ld * sizeof(float));
}

// C[0:rows, 0:cols] = alpha * a . b + beta * C for one C block (rows, cols <= 32) over kp_pad
// pairs; a: 32 rows of pairs with stride kKp, b: a panel's 32 columns with stride kNr.
// beta == 0 never reads C. With alpha = 1 and beta = 1 (a backward pass adding into a
// gradient, or a later block of k) the tiles start from C and add the pairs to it; a whole
// block with alpha = 1 and beta 0 or 1 loads and stores C's tiles in place, and any other
// goes through a buffer that rounds the same.
void block(const Pair* a, const Pair* b, int kp_pad, float* C, int ldc, int rows, int cols,
           float alpha, float beta) {
  const bool add_to_c = alpha == 1.0f && beta == 1.0f;
  const bool in_place = rows == kBlock && cols == kBlock && alpha == 1.0f && (beta == 0.0f || add_to_c);
  alignas(64) float sums[kBlock][kBlock];  // (32, 32) fp32, for blocks not in place
  const __mmask16 mask[2] = {__mmask16((1u << std::min(cols, 16)) - 1),
                             __mmask16((1u << std::clamp(cols - 16, 0, 16)) - 1)};
  if (in_place && add_to_c) {
    load_c_tiles(C, ldc);
  } else if (add_to_c) {
    for (int r = 0; r < kBlock; ++r)
      for (int v = 0; v < 2; ++v)
        _mm512_store_ps(&sums[r][16 * v], r < rows ? _mm512_maskz_loadu_ps(mask[v], C + int64_t(r) * ldc + 16 * v)
                                                   : _mm512_setzero_ps());
    load_c_tiles(&sums[0][0], kBlock);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  tile_loads_follow_stores();  // the packed pairs
  for (int kp = 0; kp < kp_pad; kp += kTilePairs) {
    _tile_loadd(4, a + kp, kKp * sizeof(Pair));
    _tile_loadd(5, a + kTile * kKp + kp, kKp * sizeof(Pair));
    _tile_loadd(6, b + int64_t(kp) * kNr, kNr * sizeof(Pair));
    _tile_loadd(7, b + int64_t(kp) * kNr + kTile, kNr * sizeof(Pair));
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  if (in_place) return store_c_tiles(C, ldc);
  store_c_tiles(&sums[0][0], kBlock);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int r = 0; r < rows; ++r) {
    float* c = C + int64_t(r) * ldc;
    for (int v = 0; v < 2; ++v) {
      if (!mask[v]) continue;
      __m512 out = _mm512_load_ps(&sums[r][16 * v]);
      if (!add_to_c) {
        out = _mm512_mul_ps(va, out);
        if (beta != 0.0f) out = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask[v], c + 16 * v), out);
      }
      _mm512_mask_storeu_ps(c + 16 * v, mask[v], out);
    }
  }
}

void sgemm_blocked(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                   int lda, const float* B, int ldb, float beta, float* C, int ldc,
                   float* a_row_sums, const uint8_t* k_used) {
  alignas(64) Pair packed_b[kPackPanels * kKp * kNr];
  alignas(64) Pair packed_a[kMc * kKp];
  const int panels = (N + kNr - 1) / kNr;
  for (int k0 = 0; k0 < K; k0 += kKc) {
    const int kc = std::min(kKc, K - k0);
    const int kp_pad = ((kc + 1) / 2 + kTilePairs - 1) / kTilePairs * kTilePairs;
    const float block_beta = k0 == 0 ? beta : 1.0f;  // later blocks add to the first's sum
    for (int p0 = 0; p0 < panels; p0 += kPackPanels) {
      const int p1 = std::min(panels, p0 + kPackPanels), j_first = p0 * kNr;
      const float* b_first = trans_b ? B + int64_t(j_first) * ldb : B + j_first;
      pack_b<kNr>(trans_b, b_first, ldb, k0, kc, std::min(N, p1 * kNr) - j_first, kp_pad, packed_b);
      for (int i0 = 0; i0 < M; i0 += kMc) {
        const int rows = std::min(kMc, M - i0);
        float* sums = a_row_sums && p0 == 0 ? a_row_sums + i0 : nullptr;  // once a block of k
        pack_a(trans_a, A, lda, i0, rows, k0, kc, kp_pad, packed_a, sums, k_used);
        for (int p = p0; p < p1; ++p) {
          const Pair* panel = packed_b + int64_t(p - p0) * kp_pad * kNr;
          for (int jb = 0; jb < kNr && p * kNr + jb < N; jb += kBlock) {
            const int j = p * kNr + jb, cols = std::min(kBlock, N - j);
            for (int i = 0; i < rows; i += kBlock)
              block(packed_a + int64_t(i) * kKp, panel + jb, kp_pad, C + int64_t(i0 + i) * ldc + j,
                    ldc, std::min(kBlock, rows - i), cols, alpha, block_beta);
          }
        }
      }
    }
  }
}

}  // namespace

void sgemm_amx_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                    int lda, const float* B, int ldb, float beta, float* C, int ldc,
                    float* a_row_sums, const uint8_t* k_used) {
  if (K <= 0) return sgemm_avx512(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  // The tile configuration belongs to the thread, and releasing it after the product keeps
  // the threads' saved state small between products.
  load_tile_config();
  sgemm_blocked(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, a_row_sums,
                k_used);
  _tile_release();
}

MINIVIT_ISA_END
}  // namespace minivit

