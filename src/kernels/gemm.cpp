#include "minivit/kernels/gemm.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "minivit/core/error.h"

#include "minivit/kernels/sgemm_avx2.h"
#include "minivit/kernels/sgemm_avx512.h"
#include "minivit/kernels/threads.h"
#include "tile_epilogue.h"

namespace minivit {
MINIVIT_ISA_BEGIN

// The epilogue as separate passes, for kernels that do not fuse it: a bias alone seeds C
// before the product (the product then adds onto it), a residual and its bias are added
// after it, then the GELU, so the sums round as the fused kernels round them.
static void seed_bias(const GemmEpilogue& e, int M, int N, float* C, int ldc) {
  for (int i = 0; i < M; ++i) std::copy_n(e.bias, N, C + int64_t(i) * ldc);
}

static void add_residual(const GemmEpilogue& e, int M, int N, float* C, int ldc) {
  for (int i = 0; i < M; ++i) {
    float* c = C + int64_t(i) * ldc;
    const float* x = e.residual + i * e.ld_residual;
    if (e.bias) {
#pragma omp simd
      for (int j = 0; j < N; ++j) c[j] = x[j] + c[j] + e.bias[j];
    } else {
#pragma omp simd
      for (int j = 0; j < N; ++j) c[j] = x[j] + c[j];
    }
  }
}

// The epilogue's a_row_sums for OpenBLAS, which does not take it, rounded as minivit's
// kernels sum them (gemm.h). A is transposed (gemm() checks), so a row of A holds one k of
// every sum.
static void add_a_row_sums(int M, int K, const float* A, int lda, float* sums,
                           const uint8_t* k_used) {
  constexpr int kRun = 128, kChunk = 256;
  for (int k0 = 0; k0 < K; k0 += kRun) {
    const int k1 = std::min(K, k0 + kRun);
    for (int i0 = 0; i0 < M; i0 += kChunk) {
      const int rows = std::min(kChunk, M - i0);
      float run[kChunk] = {};
      for (int k = k0; k < k1; ++k) {
        if (k_used && !k_used[k]) continue;
        const float* a = A + int64_t(k) * lda + i0;
#pragma omp simd
        for (int i = 0; i < rows; ++i) run[i] += a[i];
      }
#pragma omp simd
      for (int i = 0; i < rows; ++i) sums[i0 + i] += run[i];
    }
  }
}

// minivit's fp32 kernels leave GELU to one pass over their part of C after the product, as
// around OpenBLAS, rather than running it on each tile as they store it: on a Zen 4 the pass
// after made a one-thread evaluation 1-3% faster at the AVX-512 and AVX2 levels, and a
// training step 1-3% at the AVX2 level (level at AVX-512; results.md). The same function
// of each element, so the same bits. No product asks for GELU and a scale together, whose
// order would otherwise change.
#if MINIVIT_ISA_LEVEL >= 1
static GemmEpilogue without_gelu(GemmEpilogue e) {
  e.gelu = nullptr;
  return e;
}

static void gelu_after(const GemmEpilogue& e, int M, int N, float* C, int ldc) {
  if (e.gelu) gelu_epilogue(e.gelu, e.ld_gelu, C, ldc, M, N, e.gelu_slope);
}
#endif

// One product on the calling thread. Each level holds the kernels it can run (isa.h); a
// request for kernels of another level, which Compute never makes, goes to OpenBLAS.
static void serial_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                         const float* A, int lda, const float* B, int ldb, float beta, float* C,
                         int ldc, Products products, const GemmEpilogue& e,
                         const uint8_t* k_used) {
  [[maybe_unused]] const bool bf16 = products.precision == Precision::bf16;
#if MINIVIT_ISA_LEVEL == 2
  const bool amx_tiles = bf16 && products.kernels == GemmKernels::amx;
#else
  const bool amx_tiles = false;
#endif
#if MINIVIT_ISA_LEVEL == 2
  if (bf16 && products.kernels == GemmKernels::avx512 && cpu_has_avx512_bf16())
    return sgemm_avx512_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, e);
  if (!amx_tiles &&
      (products.kernels == GemmKernels::avx512 || products.kernels == GemmKernels::amx)) {
    sgemm_avx512(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                 without_gelu(e), k_used);
    return gelu_after(e, M, N, C, ldc);
  }
#elif MINIVIT_ISA_LEVEL == 1
  if (products.kernels == GemmKernels::avx2) {
    sgemm_avx2(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, without_gelu(e),
               k_used);
    return gelu_after(e, M, N, C, ldc);
  }
#endif
  // The AMX tiles and OpenBLAS store C as it is: the epilogue runs around them. The AMX
  // tiles sum a transposed A's rows as they pack A, as minivit's other kernels do as they
  // read it.
  if (e.a_row_sums && !amx_tiles) add_a_row_sums(M, K, A, lda, e.a_row_sums, k_used);
  if (e.bias && !e.residual) {
    seed_bias(e, M, N, C, ldc);
    beta = 1.0f;
  }
#if MINIVIT_ISA_LEVEL == 2
  if (amx_tiles)
    sgemm_amx_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, e.a_row_sums,
                   k_used);
  else
#endif
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
  if (e.residual) add_residual(e, M, N, C, ldc);
  if (e.gelu) gelu_epilogue(e.gelu, e.ld_gelu, C, ldc, M, N, e.gelu_slope);
  if (e.scale) scale_epilogue(C, ldc, e.scale, e.ld_scale, M, N);
}

// serial_sgemm's routes that take k_used: the fp32 kernels of minivit's own.
bool skips_unused_k(Products products) {
  if (products.precision != Precision::fp32) return false;
#if MINIVIT_ISA_LEVEL == 2
  return products.kernels == GemmKernels::avx512 || products.kernels == GemmKernels::amx;
#elif MINIVIT_ISA_LEVEL == 1
  return products.kernels == GemmKernels::avx2;
#else
  return false;
#endif
}

// Below this many multiply-adds a split costs more in synchronisation than it saves.
static constexpr double kMinSplitWork = 1 << 18;

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc, Products products,
          const GemmEpilogue& epilogue, const uint8_t* k_used) {
  if (M <= 0 || N <= 0) return;
  if (!epilogue.empty() && beta != 0.0f)
    throw Error("gemm: an epilogue (bias, residual, GELU or scale) needs beta = 0");
  if (epilogue.a_row_sums && !trans_a)
    throw Error("gemm: a_row_sums needs A transposed (a weight gradient's dout^T)");
  // The cut depends on the shape and the machine alone, never on the thread count:
  // OpenBLAS's kernels round the last rows or columns of a call (its size modulo their
  // unroll) in another order, so a cut that moved with the thread count would move the
  // rounding with it, and a run on one thread would not repeat a run on two.
  const double work = double(M) * N * K;
  const bool split_rows = M >= N;
  const int extent = split_rows ? M : N;
  const int parts = int(std::min<double>({double(max_work_blocks()), std::max(1.0, work / kMinSplitWork),
                                          double(extent)}));
  // Inside a parallel region (a chunk of the batch, vit.cpp) the product runs on the calling
  // thread. minivit's kernels round each element the same whatever the cut, so they take
  // the product whole; OpenBLAS's are given the same cut as on the pool, one piece after
  // another, so the rounding still does not depend on how many threads run.
  const bool nested = omp_in_parallel();
  const int threads = nested ? 1 : std::min(omp_get_max_threads(), parts);
  if (parts == 1 || (threads == 1 && products.kernels != GemmKernels::openblas)) {
    serial_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, products,
                 epilogue, k_used);
    return;
  }
  // Contiguous blocks of rows (or columns) of C, each computed by exactly one thread.
  auto run_part = [&](int part) {
    const int begin = int(int64_t(extent) * part / parts);
    const int end = int(int64_t(extent) * (part + 1) / parts);
    if (end <= begin) return;
    GemmEpilogue part_epilogue = epilogue;
    if (split_rows) {
      const float* A_part = trans_a ? A + begin : A + int64_t(begin) * lda;
      if (epilogue.a_row_sums) part_epilogue.a_row_sums += begin;
      if (epilogue.residual) part_epilogue.residual += begin * epilogue.ld_residual;
      if (epilogue.gelu) part_epilogue.gelu += begin * epilogue.ld_gelu;
      if (epilogue.scale) part_epilogue.scale += begin * epilogue.ld_scale;
      serial_sgemm(trans_a, trans_b, end - begin, N, K, alpha, A_part, lda, B, ldb, beta,
                   C + int64_t(begin) * ldc, ldc, products, part_epilogue, k_used);
    } else {
      const float* B_part = trans_b ? B + int64_t(begin) * ldb : B + begin;
      if (part != 0) part_epilogue.a_row_sums = nullptr;  // every part reads all of op(A)
      if (epilogue.residual) part_epilogue.residual += begin;
      if (epilogue.bias) part_epilogue.bias += begin;
      if (epilogue.gelu) part_epilogue.gelu += begin;
      if (epilogue.scale) part_epilogue.scale += begin;
      serial_sgemm(trans_a, trans_b, M, end - begin, K, alpha, A, lda, B_part, ldb, beta,
                   C + begin, ldc, products, part_epilogue, k_used);
    }
  };
  if (threads == 1) {
    for (int part = 0; part < parts; ++part) run_part(part);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int part = 0; part < parts; ++part) run_part(part);
}

MINIVIT_ISA_END
}  // namespace minivit
