#pragma once
// Patch dropout (timm's PatchDropout, Liu et al. 2022, "PatchDropout: Economizing Vision
// Transformers Using Patch Dropout"): in training each image keeps a random subset of
// `kept` of its N patch tokens, after the position embedding, and the blocks see only
// those, so a training step costs about kept / N of one over every token. Evaluation
// keeps every token. A CLS token, when there is one, is always kept, first.
//   tokens    (B, prefix + N, D)     prefix = 1 with a CLS token, else 0
//   keep      (B, N)                 1 for a kept patch, 0 for a dropped one
//   out       (B, prefix + kept, D)  the prefix, then the kept patches in grid order
// How many an image keeps is ModelConfig::kept_patches. Which ones is drawn from the
// counter-based generator (rng.h) under `key` at the image's index in the whole batch, so
// the draws do not depend on how the batch is cut into chunks, threads or processes: patch
// i of image b draws rng_uniform(key, b * N + i), and the `kept` smallest draws are kept
// (the lower index first between equal draws). timm draws the same kind of subset, any
// `kept` patches with equal chance, by sorting normal draws.
#include <cstdint>
#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN

// Fills keep (n, N) for images first_image .. first_image + n - 1: `kept` ones an image.
// draws (n, N) is scratch, left holding the images' draws in some order.
void patch_drop_draw(uint8_t* keep, float* draws, int n, int N, int kept, uint64_t key,
                     int64_t first_image);

// out (n, prefix + kept, D) = the prefix rows and the kept patch rows of tokens.
void patch_drop_forward(float* out, const float* tokens, const uint8_t* keep, int n, int prefix,
                        int N, int kept, int D);

// dtokens (n, prefix + N, D) += dout (n, prefix + kept, D) put back at the rows forward took
// them from; a dropped patch's rows take nothing. Without add_into it writes dtokens
// instead: 0 + dout's row, as an add into a cleared dtokens would (so the same bits), and
// zeros at a dropped patch's rows, sparing the caller a pass to clear it. Splits the images
// over the pool when there are enough rows.
void patch_drop_backward(float* dtokens, const float* dout, const uint8_t* keep, int n,
                         int prefix, int N, int kept, int D, bool add_into);

// full (n, N, D) = the rows of kept_rows (n, kept, D) at the kept patches, in grid order, and
// zero rows at the dropped ones: the inverse of patch_drop_forward with no prefix, for
// buffers that a whole-grid pass reads (conv_stem.cpp).
void patch_drop_spread(float* full, const float* kept_rows, const uint8_t* keep, int n, int N,
                       int kept, int D);

MINIVIT_ISA_END
}  // namespace minivit
