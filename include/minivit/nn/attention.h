#pragma once
// Multi-head self-attention, the part between the qkv and output projections (those are
// linear layers). Layout follows timm's reshape(B, T, 3, H, Dh):
//   qkv (B, T, 3D)      per token [q heads | k heads | v heads], head h at offset h*Dh
//   att (B, H, T, T)    softmax(e) per head, before dropout: cached for backward and kept
//                       as the attention maps users inspect
//   att_mask (B,H,T,T)  dropout keep-mask on the attention weights (unused when p == 0)
//   out (B, T, D)       heads side by side: out[b, t, h*Dh + j]
//   scratch             (slots, attention_scratch_floats(T, Dh)) one row per thread: the
//                       work runs on at most `slots` threads of the pool
// The scores e_ij of head h come from one of the forms of AttentionScore. Work is spread
// over (batch, head) pairs; each pair runs on one thread, in fused loops rather than BLAS
// calls (its matrices are too small for BLAS to pay off; see attention.cpp).
#include <cstdint>

#include "minivit/core/config.h"
#include "minivit/kernels/isa.h"

namespace minivit {

// The score function and its learned parameters, per head h with q, k its slices of qkv:
//   scaled_dot  e_ij = q_i . k_j / sqrt(Dh)
//   dot         e_ij = q_i . k_j
//   additive    e_ij = additive_v[h] . tanh(q_i + k_j)
//   cosine      e_ij = cos(q_i, k_j) * exp(min(logit_scale[h], ln 100)), each vector
//               divided by max(|x|, 1e-12) (Swin v2)
//   lsa         e_ij = q_i . k_j * exp(min(logit_scale[h], ln 100)) for j != i, and the
//               lowest float for j = i, so a token does not attend to itself (locality
//               self-attention, Lee et al. 2021: a learned temperature, the diagonal masked)
// An additive head whose |q|, |k| are all at most kAdditiveExpBound, at a head size compiled
// for (8, 16, 32, 64), takes tanh(a + b) = (P - 1) / (P + 1) from P = e^2a e^2b, with the
// exps taken once per head (3.5x faster training than a tanh per element): the products then
// lie in [e^-80, e^80] = [1.8e-35, 5.5e34], normal floats (1.2e-38 .. 3.4e38), and so do
// P + 1 and its reciprocal. Other heads take tanh element by element (e^2a overflows beyond
// a = 44, and inf * 0 is a NaN); the two agree to float rounding.
constexpr float kAdditiveExpBound = 20.0f;

struct AttentionScore {
  AttentionForm form = AttentionForm::scaled_dot;
  const float* additive_v = nullptr;   // (H, Dh), additive
  const float* logit_scale = nullptr;  // (H), cosine and lsa: the log of each head's temperature
};

// Whether a form has parameters of its own, whose gradients backward adds.
constexpr bool attention_has_score_params(AttentionForm form) {
  return form == AttentionForm::additive || form == AttentionForm::cosine ||
         form == AttentionForm::lsa;
}

// Where backward adds the score function's parameter gradients. per_pair is scratch of
// attention_score_grad_floats(B, H, Dh) floats: each (batch, head) writes its share there,
// and the shares are summed in a fixed order, so the result does not depend on threads.
// Unused (may be null) for the dot forms.
struct AttentionScoreGrad {
  float* additive_v = nullptr;   // (H, Dh), added into
  float* logit_scale = nullptr;  // (H), added into
  float* per_pair = nullptr;     // (B, H, Dh)
};

MINIVIT_ISA_BEGIN

// The dropout mask of att element e draws at index mask_first_index + e (dropout.h).
void attention_forward(float* out, float* att, uint8_t* att_mask, const float* qkv, int B,
                       int T, int D, int H, const AttentionScore& score, float dropout_p,
                       uint64_t dropout_key, float* scratch, int slots,
                       int64_t mask_first_index = 0);

// attention_forward without dropout for the (batch, head) pairs [pair_begin, pair_end) of
// the batch alone, on the calling thread in its slot of `scratch`: for the threads of a
// region that split one chunk's heads between them (model/vit_forward.cpp).
void attention_forward_pairs(float* out, float* att, const float* qkv, int T, int D, int H,
                             const AttentionScore& score, float* scratch, int slots,
                             int pair_begin, int pair_end);

// Sets dqkv (B, T, 3D), whatever it held; adds into the score parameters' gradients.
void attention_backward(float* dqkv, const AttentionScoreGrad& dscore, const float* dout,
                        const float* qkv, const float* att, const uint8_t* att_mask, int B,
                        int T, int D, int H, const AttentionScore& score, float dropout_p,
                        float* scratch, int slots);

// attention_backward in two halves, for a caller that takes the batch in chunks: the first
// leaves each (batch, head)'s share of the score parameters' gradient in dscore.per_pair
// (addressed at the chunk's first pair), the second adds the whole batch's shares in batch
// order into dscore's parameters (nothing for the dot forms).
void attention_backward_pairs(float* dqkv, const AttentionScoreGrad& dscore, const float* dout,
                              const float* qkv, const float* att, const uint8_t* att_mask,
                              int B, int T, int D, int H, const AttentionScore& score,
                              float dropout_p, float* scratch, int slots);
void attention_add_score_grads(const AttentionScoreGrad& dscore, int B, int H, int Dh,
                               AttentionForm form);

// The gradient at the attention weights themselves, datt (B, H, T, T) = the gradient at
// att (the softmax, before dropout): (dout_h V_h^T) * mask / (1 - p), overwritten. Not
// needed for training (attention_backward goes straight through to the scores); kept for
// inspection, where a class's gradient at each attention weight says which weights raised
// that class.
void attention_weights_grad(float* datt, const float* dout, const float* qkv,
                            const uint8_t* att_mask, int B, int T, int D, int H,
                            float dropout_p);

// Floats of scratch one thread works in, for T tokens and heads of width Dh.
int64_t attention_scratch_floats(int T, int Dh);

// Floats of AttentionScoreGrad::per_pair for a batch of B.
int64_t attention_score_grad_floats(int B, int H, int Dh);

MINIVIT_ISA_END
}  // namespace minivit
