#pragma once
#include <cstdint>

#include "minivit/kernels/isa.h"
// Patch embedding, CLS token and position embedding: the front of the ViT.
// timm's Conv2d(C, D, P, stride P) is a linear layer on patches flattened in
// (channel, row, column) order, so its weight (D, C, P, P) is used as (D, C*P*P).
//   images      (B, C, S, S)    S = image_size
//   patches     (B, N, C*P*P)   patch n = row-major position in the G x G grid
//               (B, N, 5*C*P*P) shifted: the patch, then the same window of the image
//                               shifted by (-h, -h), (-h, +h), (+h, -h), (+h, +h) pixels
//                               (rows, columns), h = P / 2, zero where it leaves the image
//   patch_proj  (B, N, D)       patches . W^T + b        (a linear layer, see linear.h)
//   tokens      (B, T, D)       [cls ; patch_proj] + pos   with a CLS token, T = N + 1
//                               patch_proj + pos           without one, T = N
// The position embedding pos (T, D) may be absent (nullptr): then nothing is added. In
// backward a null dpos_embed means the positions take no gradient (absent, or a fixed
// table that is never trained).
namespace minivit {
MINIVIT_ISA_BEGIN

// Shifted patches (Lee et al., "Vision Transformer for Small-Size Datasets", 2021) let each
// token see the pixels around its patch: the patch embedding gets a little of what a
// convolution's overlapping windows give. The image needs no gradient, so neither form has
// a backward pass here; the projection's is linear_backward's.
void patchify(float* patches, const float* images, int B, int C, int image_size, int P,
              bool shifted = false);

// tokens (B, prefix + K, D), the first block's input: with a CLS token (cls_token not
// null, prefix = 1) the token plus position 0's row of pos_embed first, then each patch's
// row of patch_proj (B, K, D) plus its own position's row (prefix + i for patch i). pos_embed
// ((prefix + N, D)) null: no position embedding, the rows as they are. keep (B, N) null:
// every patch, K = N; else patch dropout's kept patches (K = kept), patch_proj holding their
// rows alone, in order: each gets the position of the patch it is, the same sum as when
// every patch is embedded, so the same bits, without the dropped patches' rows.
void embed_tokens_forward(float* tokens, const float* patch_proj, const float* cls_token,
                          const float* pos_embed, int B, int N, int D,
                          const uint8_t* keep = nullptr, int kept = 0);

// The backward of embed_tokens_forward over every patch, with a CLS token: sets dpatch_proj
// (B, N, D); adds into dcls_token (D) and dpos_embed (T, D) when not null.
void embed_tokens_backward(float* dpatch_proj, float* dcls_token, float* dpos_embed,
                           const float* dtokens, int B, int N, int D);

// The same without a CLS token: sets dpatch_proj (B, N, D); adds into dpos_embed (N, D)
// when not null. dtokens may be dpatch_proj itself, holding 0 + each gradient already (as
// patch_drop_backward writes it): its rows then stay, the same bits a copy would give.
void embed_patch_tokens_backward(float* dpatch_proj, float* dpos_embed, const float* dtokens,
                                 int B, int N, int D);

MINIVIT_ISA_END
}  // namespace minivit
