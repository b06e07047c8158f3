#pragma once
// The conv stem's passes (model.patch_embed = "conv"), between the images and the patch
// projection: stage s = GELU(conv3x3_s2(stage s - 1) + bias), the last writing
// Activations::patches. Internal to src/model.
#include "minivit/model/activations.h"
#include "minivit/model/vit.h"
#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN

// Images [b0, b0 + n) of the batch (`images` at image b0) through every stage; with
// keep_gelu_slope (a training forward) each stage's pre holds GELU's slope, which is what
// stem_backward then multiplies by. With `keep` (the chunk's rows of
// Activations::patch_keep: a training forward with patch dropout) the last stage runs on the
// kept positions alone, into Activations::kept_pre and kept_patches, and leaves `patches`
// zero at the dropped ones; a stage before it computes only the positions that the kept
// windows read (StemActivations::read) and leaves the others zero. The windows of the
// positions left out are gathered as zero rows, which the weight gradients skip.
void stem_forward_chunk(const ViT& model, Activations& acts, const float* images, int b0, int n,
                        bool keep_gelu_slope, const uint8_t* keep = nullptr);

// From the gradient at the stem's output (Activations::dpatches, batch B) back through every
// stage, adding into the stem's weight gradients. The images take no gradient. With
// kept_only (after a forward with `keep`) the gradient comes in Activations::dkept_patches,
// at the kept positions alone.
void stem_backward(ViT& model, Activations& acts, int B, bool kept_only = false);

MINIVIT_ISA_END
}  // namespace minivit
