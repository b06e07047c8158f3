#include "minivit/kernels/gemm.h"

#include <cblas.h>
#include <strings.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "minivit/kernels/sgemm_avx2.h"
#include "minivit/kernels/sgemm_avx512.h"
#include "minivit/kernels/threads.h"

namespace minivit {

// Read once from MINIVIT_GEMM (auto, openblas, avx2, avx512 or amx); set_gemm_kernels() changes
// it between products. A value that cannot be followed is said once on stderr and the
// automatic choice made instead: a speed setting never stops a run.
static GemmKernels& kernels_in_use() {
  static GemmKernels kernels = [] {
    const GemmKernels automatic = sgemm_amx_bf16_available() ? GemmKernels::amx
                                  : sgemm_avx512_available() ? GemmKernels::avx512
                                  : sgemm_avx2_available()   ? GemmKernels::avx2
                                                             : GemmKernels::openblas;
    const char* env = std::getenv("MINIVIT_GEMM");
    if (!env || !*env || strcasecmp(env, "auto") == 0) return automatic;
    if (strcasecmp(env, "openblas") == 0) return GemmKernels::openblas;
    const bool avx2 = strcasecmp(env, "avx2") == 0, avx512 = strcasecmp(env, "avx512") == 0,
               amx = strcasecmp(env, "amx") == 0;
    if (avx2 && sgemm_avx2_available()) return GemmKernels::avx2;
    if (avx512 && sgemm_avx512_available()) return GemmKernels::avx512;
    if (amx && sgemm_amx_bf16_available()) return GemmKernels::amx;
    const char* why = avx2     ? "this build has no AVX2 kernels"
                      : avx512 ? "this build has no AVX-512 kernels"
                      : amx    ? "AMX tiles are not built in or not usable on this CPU"
                               : "expected auto, openblas, avx2, avx512 or amx";
    std::fprintf(stderr, "minivit: MINIVIT_GEMM=%s: %s; using %s\n", env, why,
                 automatic == GemmKernels::amx      ? "amx"
                 : automatic == GemmKernels::avx512 ? "avx512"
                 : automatic == GemmKernels::avx2   ? "avx2"
                                                    : "openblas");
    return automatic;
  }();
  return kernels;
}

GemmKernels gemm_kernels() { return kernels_in_use(); }

bool set_gemm_kernels(GemmKernels kernels) {
  if (kernels == GemmKernels::avx2 && !sgemm_avx2_available()) return false;
  if (kernels == GemmKernels::avx512 && !sgemm_avx512_available()) return false;
  if (kernels == GemmKernels::amx && !sgemm_amx_bf16_available()) return false;
  kernels_in_use() = kernels;
  return true;
}

std::string gemm_kernels_name() {
  if (kernels_in_use() == GemmKernels::avx2) return "minivit AVX2";
  if (kernels_in_use() == GemmKernels::avx512) return "minivit AVX-512";
  if (kernels_in_use() == GemmKernels::amx) return "minivit AVX-512 + AMX";
  return std::string("OpenBLAS ") + openblas_get_corename();
}

bool bf16_products_available() {
  return kernels_in_use() == GemmKernels::amx ||
         (kernels_in_use() == GemmKernels::avx512 && sgemm_avx512_bf16_available());
}

Precision effective_precision(Precision asked) {
  return asked == Precision::bf16 && !bf16_products_available() ? Precision::fp32 : asked;
}

std::string precision_note(Precision asked) {
  if (effective_precision(asked) == asked) return "";
  const std::string why = sgemm_avx512_bf16_available()
                              ? "the products run on " + gemm_kernels_name() + " (MINIVIT_GEMM)"
                              : std::string("this build has no AVX512_BF16 kernels (a CPU with "
                                            "AVX512_BF16 and the default -march=native build)");
  return "note: train.precision = \"bf16\": " + why + "; the blocks' products run in fp32";
}

// One product on the calling thread.
static void serial_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                         const float* A, int lda, const float* B, int ldb, float beta, float* C,
                         int ldc, Precision precision) {
  if (precision == Precision::bf16 && kernels_in_use() == GemmKernels::amx)
    return sgemm_amx_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (precision == Precision::bf16 && bf16_products_available())
    return sgemm_avx512_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (kernels_in_use() == GemmKernels::avx2)
    return sgemm_avx2(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (kernels_in_use() != GemmKernels::openblas)
    return sgemm_avx512(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
              ldc);
}

// Below this many multiply-adds a split costs more in synchronisation than it saves.
static constexpr double kMinSplitWork = 1 << 18;

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc, Precision precision) {
  if (M <= 0 || N <= 0) return;
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
  if (parts == 1 || (threads == 1 && kernels_in_use() != GemmKernels::openblas)) {
    serial_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, precision);
    return;
  }
  // Contiguous blocks of rows (or columns) of C, each computed by exactly one thread.
  auto run_part = [&](int part) {
    const int begin = int(int64_t(extent) * part / parts);
    const int end = int(int64_t(extent) * (part + 1) / parts);
    if (end <= begin) return;
    if (split_rows) {
      const float* A_part = trans_a ? A + begin : A + int64_t(begin) * lda;
      serial_sgemm(trans_a, trans_b, end - begin, N, K, alpha, A_part, lda, B, ldb, beta,
                   C + int64_t(begin) * ldc, ldc, precision);
    } else {
      const float* B_part = trans_b ? B + int64_t(begin) * ldb : B + begin;
      serial_sgemm(trans_a, trans_b, M, end - begin, K, alpha, A, lda, B_part, ldb, beta,
                   C + begin, ldc, precision);
    }
  };
  if (threads == 1) {
    for (int part = 0; part < parts; ++part) run_part(part);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int part = 0; part < parts; ++part) run_part(part);
}

}  // namespace minivit
