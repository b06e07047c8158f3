#pragma once
// 3x3 convolution of stride 2 and padding 1, the conv stem's (model.patch_embed = "conv"),
// as a product: gathering each output position's 3x3 window of every input channel into
// one row, in (channel, row, column) order, the order of PyTorch's weight (C_out, C_in, 3, 3)
// flattened, makes the convolution linear_forward(rows, weight, bias) and its backward
// linear_backward plus the scatter below, the gather's adjoint.
// An S x S input gives (S + 1) / 2 positions a side; the window of output (y, x) covers
// input rows 2y - 1 .. 2y + 1 and columns 2x - 1 .. 2x + 1, zero outside.
#include <cstdint>
#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN

// Output positions a side of a stride-2 convolution over S x S.
inline int conv3x3_s2_side(int S) { return (S + 1) / 2; }

// rows (B, S_out^2, 9 C) = each position's window, positions row-major. `inp` holds B
// images of C channels, S x S: (B, C, S, S) when channels_first (the images), else
// (B, S, S, C) (the stem's own activations, channels last as linear layers write them).
// With `keep` (B, S_out^2), only the kept positions' rows are gathered. The others are set
// to zero when clear_left_out holds: patch dropout reads the kept rows alone, and a product
// over every row (a weight gradient that sums over all positions) takes exact zeros from the
// others. Else they are not cleared (they hold earlier values, or their own windows'), for
// a product that skips them (gemm.h's k_used and skips_unused_k).
void conv3x3_s2_gather(float* rows, const float* inp, int B, int C, int S, bool channels_first,
                       const uint8_t* keep = nullptr, bool clear_left_out = true);

// dinp (B, S, S, C) += every row of drows (B, S_out^2, 9 C) added back to the pixels its
// entries were gathered from. Each image is one thread's, its sums in a fixed order.
// With `keep` (B, S_out^2), drows holds the rows of the kept positions alone, (B, kept,
// 9 C), each image's in position order, and the others add nothing.
void conv3x3_s2_scatter(float* dinp, const float* drows, int B, int C, int S,
                        const uint8_t* keep = nullptr, int kept = 0);

// read (B, S, S) = 1 at each input position that the window of an output position marked in
// `outputs` (B, S_out^2) covers, else 0: with patch dropout behind a stem of several stages,
// the positions of a stage that the next stage's kept windows read (conv_stem.cpp).
void conv3x3_s2_windows_read(uint8_t* read, const uint8_t* outputs, int B, int S);

MINIVIT_ISA_END
}  // namespace minivit
