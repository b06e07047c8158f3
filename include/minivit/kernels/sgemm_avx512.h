#pragma once
// A single-threaded sgemm with AVX-512 kernels for the shapes of a small ViT, used by
// gemm() (gemm.h) with the same arguments and row-major convention. Compiled into the
// AVX-512 level only (kernels/isa.h).
#include "minivit/kernels/gemm.h"  // GemmEpilogue
#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN

void sgemm_avx512(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                  int lda, const float* B, int ldb, float beta, float* C, int ldc,
                  const GemmEpilogue& epilogue = {}, const uint8_t* k_used = nullptr);

// The same products with op(A) and op(B) rounded to bfloat16 (to nearest even) and their
// products summed in fp32, by AVX512_BF16's VDPBF16PS: about twice the rate. Compiled with
// AVX512_BF16 on; gemm() calls it only on a CPU that has it (cpu_has_avx512_bf16). Takes the
// epilogue's a_row_sums where A is transposed, as gemm() requires of it.
void sgemm_avx512_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                       const float* A, int lda, const float* B, int ldb, float beta, float* C,
                       int ldc, const GemmEpilogue& epilogue = {});

// The same bf16 products on AMX tiles (TDPBF16PS), several times the rate again on the
// model's shapes. Compiled with AMX-BF16 on; gemm() calls it only with GemmKernels::amx,
// which Compute offers when the CPU has the tiles and the kernel lets the process use them.
// Takes the epilogue's a_row_sums where A is transposed, k_used's k left out of those sums
// (the tiles add the exact zeros there); gemm() runs the rest of the epilogue around it.
void sgemm_amx_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                    int lda, const float* B, int ldb, float beta, float* C, int ldc,
                    float* a_row_sums = nullptr, const uint8_t* k_used = nullptr);

MINIVIT_ISA_END
}  // namespace minivit
