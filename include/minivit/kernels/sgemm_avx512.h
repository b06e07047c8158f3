#pragma once
// A single-threaded sgemm with AVX-512 kernels for the shapes of a small ViT, used by
// gemm() (gemm.h) with the same arguments and row-major convention. Built in when minivit
// is compiled for a CPU with AVX-512, as the default -march=native build on such a CPU is.
namespace minivit {

bool sgemm_avx512_available();

void sgemm_avx512(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                  int lda, const float* B, int ldb, float beta, float* C, int ldc);

// The same products with op(A) and op(B) rounded to bfloat16 (to nearest even) and their
// products summed in fp32, by AVX512_BF16's VDPBF16PS: about twice the rate. Built in when
// the compiler targets a CPU with AVX512_BF16 (Zen 4, Sapphire Rapids and later).
bool sgemm_avx512_bf16_available();

void sgemm_avx512_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                       const float* A, int lda, const float* B, int ldb, float beta, float* C,
                       int ldc);

// The same bf16 products on AMX tiles (TDPBF16PS), several times the rate again on the
// model's shapes. Built in when the compiler targets a CPU with AMX-BF16 (Sapphire Rapids and
// later), and available when the CPU has it and the kernel lets the process use it.
bool sgemm_amx_bf16_available();

void sgemm_amx_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                    int lda, const float* B, int ldb, float beta, float* C, int ldc);

}  // namespace minivit
