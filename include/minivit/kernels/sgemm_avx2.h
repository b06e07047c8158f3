#pragma once
// A single-threaded sgemm with AVX2 and FMA kernels for the shapes of a small ViT, the
// AVX-512 kernels' scheme (sgemm_avx512.h) on 8-lane vectors, used by gemm() (gemm.h) with
// the same arguments and row-major convention on CPUs without AVX-512. Compiled into the
// AVX2 level only (kernels/isa.h).
#include "minivit/kernels/gemm.h"  // GemmEpilogue
#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN

void sgemm_avx2(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                int lda, const float* B, int ldb, float beta, float* C, int ldc,
                const GemmEpilogue& epilogue = {}, const uint8_t* k_used = nullptr);

MINIVIT_ISA_END
}  // namespace minivit
