#pragma once
// The only door to BLAS. Row-major single-precision matrix product
//   C (M, N) = alpha * op(A) (M, K) * op(B) (K, N) + beta * C
// where op(X) is X or X^T. Leading dimensions let callers address sub-matrices (one
// attention head inside a fused qkv buffer, one column block of a weight gradient)
// without copies, and beta = 1 lets backward passes add into gradients in place.
//
// Kernels: on a CPU with AVX-512, in a build for it (as the default -march=native is),
// minivit's own kernels (sgemm_avx512.h), made for these tall and thin shapes, compute
// every product; elsewhere OpenBLAS does. MINIVIT_GEMM=openblas in the environment keeps
// to OpenBLAS, to compare the two.
//
// Threading: minivit runs one pool of OpenMP threads. BLAS itself is kept single-threaded
// and gemm() splits large products across the pool by rows (or columns) of C, so the two
// never compete for the cores. Inside a parallel region gemm() runs on the calling thread.
#include <string>

namespace minivit {

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc);

enum class GemmKernels { avx512, openblas };
GemmKernels gemm_kernels();
// Returns false, and changes nothing, when asked for AVX-512 kernels that are not built in.
bool set_gemm_kernels(GemmKernels kernels);
// "minivit AVX-512" or "OpenBLAS <its kernel family>", for logs and the benchmark.
std::string gemm_kernels_name();

// Sets the size of the thread pool (0 = all cores), pins BLAS to one thread and flushes
// denormal floats to zero on the pool's threads (see gemm.cpp).
// Returns the number of threads in use.
int set_num_threads(int threads);
int num_threads();

// Most blocks a product or a sum over rows is cut into: the machine's core count, whatever
// the thread count, so the rounding (and a run's weights) does not depend on train.threads.
int max_work_blocks();

// OpenBLAS picks its kernels from the CPU model at load time; on a CPU newer than the
// library it falls back to its generic SSE3 ("Prescott") kernels, several times slower.
// Returns the kernel family to ask for through OPENBLAS_CORETYPE when that happened
// ("SkylakeX" or "Haswell", whichever the CPU supports), or nullptr when the detected
// kernels are fine. See runtime.h for how it is applied.
const char* preferred_blas_kernels();

// The kernel family in use ("SkylakeX", "Haswell", "Prescott", ...).
const char* blas_kernel_name();

// A one-line note when OpenBLAS computes the products and OPENBLAS_CORETYPE, set from
// outside, holds it to kernels older than the CPU supports (AVX2 kernels on an AVX-512
// CPU: 1.5x slower training measured on one such machine); empty otherwise. minivit never
// overrides a value the user has set.
std::string blas_kernel_advice();

}  // namespace minivit
