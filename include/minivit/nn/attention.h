#pragma once
// Multi-head scaled dot-product self-attention, the part between the qkv and output
// projections (those are linear layers). Layout follows timm's reshape(B, T, 3, H, Dh):
//   qkv (B, T, 3D)      per token [q heads | k heads | v heads], head h at offset h*Dh
//   att (B, H, T, T)    softmax(q k^T / sqrt(Dh)) per head, before dropout: cached for
//                       backward and kept as the attention maps users inspect
//   att_mask (B,H,T,T)  dropout keep-mask on the attention weights (unused when p == 0)
//   out (B, T, D)       heads side by side: out[b, t, h*Dh + j]
// Work is spread over (batch, head) pairs; each pair runs on one thread, in fused loops
// rather than BLAS calls (its matrices are too small for BLAS to pay off; see attention.cpp).
#include <cstdint>

namespace minivit {

//   scratch             (slots, attention_scratch_floats(T, Dh)) one row per thread: the
//                       work runs on at most `slots` threads of the pool
void attention_forward(float* out, float* att, uint8_t* att_mask, const float* qkv, int B,
                       int T, int D, int H, float dropout_p, uint64_t dropout_key,
                       float* scratch, int slots);

// Adds into dqkv (B, T, 3D).
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        const uint8_t* att_mask, int B, int T, int D, int H, float dropout_p,
                        float* scratch, int slots);

// Floats of scratch one thread works in, for T tokens and heads of width Dh.
int64_t attention_scratch_floats(int T, int Dh);

}  // namespace minivit
