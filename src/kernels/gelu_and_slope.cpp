// GELU and its slope over a row (vecmath.h). This file alone is compiled with GCC's
// instruction scheduling before register allocation (CMakeLists.txt): each vector's work is
// one long chain of dependent operations (a division, an exp, a degree-8 polynomial), and
// in program order the chain of one vector fills the out-of-order window before the next
// vector's starts. Scheduled, the chains of neighbouring vectors overlap (on a Zen 2, with a
// chain of two exps: 2.6 against 3.1 ns an element), with the same bits: scheduling
// reorders, it does not change arithmetic.
#include "minivit/kernels/vecmath.h"

namespace minivit {
MINIVIT_ISA_BEGIN

// The slopes are computed in whole vectors of 16 lanes, the last one padded, as
// gelu_backward's flat pass computes them: a scalar remainder loop contracts the slope's
// arithmetic into other FMAs and rounds it differently.
void gelu_and_slope(float* gelu_out, float* x, int n) {
  const int whole = n / 16 * 16;
#pragma omp simd simdlen(16)
  for (int j = 0; j < whole; ++j) {
    const float v = x[j];
    gelu_out[j] = gelu_inline(v);
    x[j] = gelu_slope_inline(v);
  }
  if (whole == n) return;
  float tail[16] = {}, slope[16];
  for (int j = whole; j < n; ++j) tail[j - whole] = x[j];
#pragma omp simd simdlen(16)
  for (int l = 0; l < 16; ++l) slope[l] = gelu_slope_inline(tail[l]);
  for (int j = whole; j < n; ++j) {
    gelu_out[j] = gelu_inline(x[j]);
    x[j] = slope[j - whole];
  }
}

MINIVIT_ISA_END
}  // namespace minivit
