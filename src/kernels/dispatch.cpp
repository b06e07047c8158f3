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

namespace {

enum class Level { x86_64, avx2, avx512 };

// The level that holds the kernels asked for; where the CPU cannot run them, the baseline's
// OpenBLAS in fp32, to which `products` is then changed.
Level level_for(Products& products) {
  if (products.kernels != GemmKernels::openblas && !cpu_runs(products.kernels)) {
    products = {GemmKernels::openblas, Precision::fp32};
    return Level::x86_64;  // OpenBLAS: its own dispatch does the rest
  }
  if (products.kernels == GemmKernels::avx2) return Level::avx2;
  if (products.kernels == GemmKernels::avx512 || products.kernels == GemmKernels::amx)
    return Level::avx512;
  return Level::x86_64;
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc, Products products,
          const GemmEpilogue& epilogue, const uint8_t* k_used) {
  switch (level_for(products)) {
    case Level::avx2:
      return isa_avx2::gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                            products, epilogue, k_used);
    case Level::avx512:
      return isa_avx512::gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                              products, epilogue, k_used);
    case Level::x86_64:
      return isa_x86_64::gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                              products, epilogue, k_used);
  }
}

bool skips_unused_k(Products products) {
  switch (level_for(products)) {
    case Level::avx2: return isa_avx2::skips_unused_k(products);
    case Level::avx512: return isa_avx512::skips_unused_k(products);
    case Level::x86_64: return isa_x86_64::skips_unused_k(products);
  }
  return false;
}

}  // namespace dispatch
}  // namespace minivit
