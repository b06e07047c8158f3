#pragma once
// The only door to BLAS. Row-major single-precision matrix product
//   C (M, N) = alpha * op(A) (M, K) * op(B) (K, N) + beta * C
// where op(X) is X or X^T. Leading dimensions let callers address sub-matrices (one
// attention head inside a fused qkv buffer, one column block of a weight gradient)
// without copies, and beta = 1 lets backward passes add into gradients in place.
//
// Kernels: on a CPU with AVX-512, in a build for it (as the default -march=native is),
// minivit's own kernels (sgemm_avx512.h), made for these tall and thin shapes, compute
// every product; on one with AVX2 and FMA but not AVX-512, the same kernels on 8-lane
// vectors (sgemm_avx2.h); elsewhere OpenBLAS does. On a CPU with AMX tiles the bf16
// products run on them (sgemm_amx_bf16). MINIVIT_GEMM=openblas in the environment keeps to
// OpenBLAS, MINIVIT_GEMM=avx2 takes the 8-lane kernels on an AVX-512 CPU, and
// MINIVIT_GEMM=avx512 leaves the AMX tiles unused, to compare them.
//
// Threading: minivit runs one pool of OpenMP threads (threads.h). BLAS itself is kept
// single-threaded and gemm() splits large products across the pool by rows (or columns) of
// C, so the two never compete for the cores. Inside a parallel region gemm() runs on the
// calling thread.
//
// Precision: Precision::bf16 asks for op(A) and op(B) rounded to bfloat16 and their
// products summed in fp32 (mixed precision, as torch.autocast's bf16 matmuls), which
// AVX512_BF16 computes at twice the fp32 rate, and AMX several times faster still. Where the kernels in use cannot
// (bf16_products_available() false) the product is computed in fp32 instead.
#include <string>

#include "minivit/core/config.h"  // Precision

namespace minivit {

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc,
          Precision precision = Precision::fp32);

// Whether gemm() computes Precision::bf16 products in bf16 with the kernels in use.
bool bf16_products_available();
// The precision gemm() computes a request for `asked` in: bf16 falls back to fp32.
Precision effective_precision(Precision asked);
// A line for the user when bf16 was asked for and cannot be had here, else "".
std::string precision_note(Precision asked);

// avx512: minivit's kernels, bf16 products on AVX512_BF16 where built in; amx: the same with
// the bf16 products on AMX tiles; avx2: minivit's kernels on 8-lane vectors, fp32 only;
// openblas: OpenBLAS, fp32 only.
enum class GemmKernels { avx2, avx512, amx, openblas };
GemmKernels gemm_kernels();
// Returns false, and changes nothing, when asked for kernels that are not built in or usable.
bool set_gemm_kernels(GemmKernels kernels);
// "minivit AVX2", "minivit AVX-512", "minivit AVX-512 + AMX" or "OpenBLAS <its kernel
// family>", for logs and the benchmark.
std::string gemm_kernels_name();

}  // namespace minivit
