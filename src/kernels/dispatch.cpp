// gemm() for the code compiled once (kernels/isa.h): the level that holds the kernels asked for.
#include "minivit/kernels/gemm.h"

namespace minivit {

#define MINIVIT_DECLARE_GEMM(level)                                                         \
  namespace level {                                                                         \
  void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,   \
            int lda, const float* B, int ldb, float beta, float* C, int ldc,                \
            Products products, const GemmEpilogue& epilogue, const uint8_t* k_used);        \
  bool skips_unused_k(Products products);                                                   \
  }
MINIVIT_DECLARE_GEMM(isa_x86_64)
MINIVIT_DECLARE_GEMM(isa_avx2)
MINIVIT_DECLARE_GEMM(isa_avx512)
#undef MINIVIT_DECLARE_GEMM

inline namespace dispatch {

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc, Products products,
          const GemmEpilogue& epilogue, const uint8_t* k_used) {
  auto* level = &isa_x86_64::gemm;  // OpenBLAS: its own dispatch does the rest
  if (products.kernels == GemmKernels::avx2) level = &isa_avx2::gemm;
  if (products.kernels == GemmKernels::avx512 || products.kernels == GemmKernels::amx)
    level = &isa_avx512::gemm;
  if (products.kernels != GemmKernels::openblas && !cpu_runs(products.kernels))
    level = &isa_x86_64::gemm, products = {GemmKernels::openblas, Precision::fp32};
  level(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, products, epilogue,
        k_used);
}

bool skips_unused_k(Products products) {
  if (products.kernels != GemmKernels::openblas && !cpu_runs(products.kernels)) return false;
  if (products.kernels == GemmKernels::avx2) return isa_avx2::skips_unused_k(products);
  if (products.kernels == GemmKernels::avx512 || products.kernels == GemmKernels::amx)
    return isa_avx512::skips_unused_k(products);
  return isa_x86_64::skips_unused_k(products);
}

}  // namespace dispatch
}  // namespace minivit
