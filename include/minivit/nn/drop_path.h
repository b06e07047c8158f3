#pragma once
// Stochastic depth (timm's DropPath, Huang et al. 2016): in training each image's whole
// residual branch is kept with probability 1 - p and scaled by 1 / (1 - p), or dropped, so
// that for that image the block passes its input through. Evaluation is the identity. One
// keep decision per image and branch, drawn from the counter-based generator (rng.h) under
// `key` at the image's index in the whole batch, so the draws do not depend on how the
// batch is cut into chunks, threads or processes.
#include <cstdint>
#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN

// The rate of block `block` of `depth`: timm's linspace(0, rate, depth), none in the first
// block and the configured rate in the last.
float drop_path_rate(float rate, int block, int depth);

// In place on n images of per_image floats each: image b is multiplied by scale[b], which
// this fills with 1 / (1 - p) (kept) or 0 (dropped). Image b draws at first_image + b.
void drop_path_forward(float* branch, float* scale, int n, int64_t per_image, float p,
                       uint64_t key, int64_t first_image);

// x[b] *= scale[b] over each image's per_image floats, in place: forward's product, and
// backward's when the gradient is already in a scratch buffer of its own.
void scale_images(float* x, const float* scale, int n, int64_t per_image);

// dinp += dout * scale[b] over each image's per_image floats. Without add_into it writes
// dinp instead: 0 + the product, as an add into a cleared dinp rounds it (a zero's sign
// included), sparing the caller a pass to clear it.
void drop_path_backward(float* dinp, const float* dout, const float* scale, int n,
                        int64_t per_image, bool add_into);

MINIVIT_ISA_END
}  // namespace minivit
