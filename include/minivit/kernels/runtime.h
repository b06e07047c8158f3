#pragma once
// Settings of the numerical runtime that the libraries read from the environment once, when
// they are loaded, and that minivit therefore applies by restarting itself (execv of
// /proc/self/exe with the same arguments) before any work:
//   OPENBLAS_CORETYPE  when OpenBLAS fell back to its generic kernels on a CPU it does not
//                      know (see preferred_blas_kernels in gemm.h)
//   GOMP_SPINCOUNT     a short spin (then sleep) for OpenMP threads waiting at a barrier:
//                      libgomp's default spins ~300k iterations, which turns into a
//                      many-fold slowdown as soon as another busy process shares the cores
// A value the user set in the environment is always kept. Call first thing in main().
namespace minivit {

void restart_with_tuned_runtime(char** argv);

}  // namespace minivit
