#pragma once
// For the tests compiled once per level (tests/CMakeLists.txt: the layer tests, built into
// minivit_layer_tests_<level>): the Compute whose kernels this file's level holds, so that a
// layer calling gemm() reaches the kernels compiled beside it. A function of this header
// called here is the level's own (kernels/isa.h).
#include "minivit/kernels/compute.h"

namespace minivit_test {

inline minivit::Compute level_compute() {
  using minivit::GemmKernels;
#if MINIVIT_ISA_LEVEL == 2
  if (auto amx = minivit::Compute::with_kernels(GemmKernels::amx)) return *amx;
  return *minivit::Compute::with_kernels(GemmKernels::avx512);
#elif MINIVIT_ISA_LEVEL == 1
  return *minivit::Compute::with_kernels(GemmKernels::avx2);
#else
  minivit::Compute baseline;  // OpenBLAS's products, the baseline's layers
  baseline.kernels = GemmKernels::openblas;
  baseline.isa = minivit::Isa::x86_64;
  return baseline;
#endif
}

// The products of a layer in this level: its kernels, in `precision` where they can.
inline minivit::Products level_products(minivit::Precision precision = minivit::Precision::fp32) {
  const minivit::Compute compute = level_compute();
  return {compute.kernels, compute.effective_precision(precision)};
}

}  // namespace minivit_test
