#pragma once
// One binary for every x86-64 CPU. The code that does the arithmetic (the product kernels,
// every layer of nn/, the model's forward and backward passes) is compiled once per
// instruction-set level below, each copy in its own namespace, and the level is chosen at
// run time from what the CPU reports (kernels/compute.h); everything else is compiled for
// the x86-64 baseline. Headers of that code wrap their declarations in
// MINIVIT_ISA_BEGIN ... MINIVIT_ISA_END, an inline namespace:
//   isa_x86_64  the baseline (SSE2), for any x86-64 CPU
//   isa_avx2    x86-64-v3: AVX2, FMA, BMI2, F16C (Haswell, Zen 1 and later)
//   isa_avx512  x86-64-v4: AVX-512 F, BW, DQ, VL, CD (Skylake-X, Zen 4 and later); the bf16
//               and AMX product kernels inside it check their own extensions at run time
// A file compiled for one level sees only that level's functions, so the copies never call
// one another. Code compiled once (train/, cli/, ...) sees the namespace `dispatch`, whose
// few functions (vit_forward, vit_backward, gemm) pick the level from the Compute they are
// handed. Inline functions and templates that the leveled code shares must sit inside the
// namespace too: one compiled for AVX-512 would otherwise be merged by the linker with the
// baseline copy, and could be the one every caller gets (tests/cpu checks the binary).
#ifndef MINIVIT_ISA_NAMESPACE
#define MINIVIT_ISA_NAMESPACE dispatch
#endif
#define MINIVIT_ISA_BEGIN inline namespace MINIVIT_ISA_NAMESPACE {
#define MINIVIT_ISA_END }

// GCC 12 warns that the AVX-512 intrinsics' own undefined operands (`__Y = __Y`) are
// uninitialised (its bug 105593, fixed in GCC 13): code that calls them sits between these.
// -Wmaybe-uninitialized is GCC's own group, unknown to clang (the fuzz build).
#if defined(__clang__)
#define MINIVIT_INTRINSICS_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#else
#define MINIVIT_INTRINSICS_BEGIN                                  \
  _Pragma("GCC diagnostic push")                                  \
  _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")          \
  _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#endif
#define MINIVIT_INTRINSICS_END _Pragma("GCC diagnostic pop")
