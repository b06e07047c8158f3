#pragma once
// Settings of the numerical runtime that the libraries read from the environment once, when
// they are loaded, and that minivit therefore applies by restarting itself (execv of
// /proc/self/exe with the same arguments) before any work:
//   OPENBLAS_CORETYPE  when OpenBLAS fell back to its generic kernels on a CPU it does not
//                      know (see preferred_blas_kernels below)
//   GOMP_SPINCOUNT     a short spin (then sleep) for OpenMP threads waiting at a barrier:
//                      libgomp's default spins ~300k iterations, which turns into a
//                      many-fold slowdown as soon as another busy process shares the cores
// A value the user set in the environment is always kept. Call first thing in main().
#include <string>

namespace minivit {

// OpenBLAS picks its kernels from the CPU model at load time; on a CPU newer than the
// library it falls back to its generic SSE3 ("Prescott") kernels, several times slower.
// Returns the kernel family to ask for through OPENBLAS_CORETYPE when that happened
// ("SkylakeX" or "Haswell", whichever the CPU supports), or nullptr when the detected
// kernels are fine. restart_with_tuned_runtime below applies it.
const char* preferred_blas_kernels();

// The kernel family in use ("SkylakeX", "Haswell", "Prescott", ...).
const char* blas_kernel_name();

// A one-line note when OpenBLAS computes the products and OPENBLAS_CORETYPE, set from
// outside, holds it to kernels older than the CPU supports (AVX2 kernels on an AVX-512
// CPU: 1.5x slower training measured on one such machine); empty otherwise. minivit never
// overrides a value the user has set.
std::string blas_kernel_advice();

void restart_with_tuned_runtime(char** argv);

}  // namespace minivit
