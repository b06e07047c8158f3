#pragma once
#include "minivit/kernels/isa.h"
// The mean over the tokens, for a head that reads every token instead of a CLS token
// (timm's global_pool='avg').
//   x       (B, T, D)
//   pooled  (B, D)      pooled[b] = (1/T) sum_t x[b, t]
namespace minivit {
MINIVIT_ISA_BEGIN

void mean_pool_forward(float* pooled, const float* x, int B, int T, int D);

// Adds dpooled[b] / T into every token's row of dx (B, T, D): each token contributed one
// T-th of the mean. Without add_into it writes dx instead, 0 + dpooled[b] / T as an add into
// a cleared dx would (so the same bits), sparing the caller a pass to clear it.
void mean_pool_backward(float* dx, const float* dpooled, int B, int T, int D, bool add_into);

MINIVIT_ISA_END
}  // namespace minivit
