#pragma once
// What minivit can say about the numerical libraries it runs on, which read their settings
// from the environment once, when they are loaded, before any of minivit's code runs:
//   OPENBLAS_CORETYPE  the kernel family OpenBLAS loads. On a CPU newer than the library it
//                      falls back to its generic SSE3 ("Prescott") kernels, several times
//                      slower; only products on OpenBLAS (GemmKernels::openblas) are
//                      affected, and blas_kernel_advice() says what to set. Set newer
//                      than the CPU, its kernels cannot run (blas_core_problem()).
//   GOMP_SPINCOUNT     iterations an OpenMP thread spins at a barrier before it sleeps.
//                      libgomp's default, ~300k, costs 1.4x in training as soon as another
//                      busy process shares the cores (docs/performance.md); 10000 is the
//                      measured remedy there.
// minivit never changes the environment of its process: the user's settings hold.
#include <string>

#include "minivit/kernels/compute.h"

namespace minivit {

// The kernel family in use ("SkylakeX", "Haswell", "Prescott", ...).
const char* blas_kernel_name();

// A one-line note when OpenBLAS computes the products of `compute` with kernels older than
// the CPU runs (its generic kernels on a CPU it does not know, or OPENBLAS_CORETYPE set to
// AVX2 kernels on an AVX-512 CPU: 1.5x slower training measured on one such machine); empty
// otherwise.
std::string blas_kernel_advice(const Compute& compute);

// Why OpenBLAS's kernels cannot run on this CPU, in one line that names OPENBLAS_CORETYPE
// and what to set instead; empty where they can. A core type set newer than the CPU
// (SkylakeX on a CPU without AVX-512, Haswell without AVX2 and FMA) makes OpenBLAS's first
// product die of an illegal instruction, which the library does not check.
std::string blas_core_problem();

}  // namespace minivit
