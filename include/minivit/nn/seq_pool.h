#pragma once
#include "minivit/kernels/isa.h"
// Sequence pooling (Hassani et al., "Escaping the Big Data Paradigm with Compact
// Transformers", 2021: CCT's SeqPool): each token gets a learned score, a softmax over an
// image's tokens turns the scores into weights, and the head reads the weighted sum. It
// lets the model choose which tokens the class is read from, where mean pooling weighs them
// all alike, at the cost of one D-vector. CCT's Linear(D, 1) has a bias too; the softmax
// cancels any constant added to every score, so it is left out.
//   x        (B, T, D)  the tokens, after the final LayerNorm
//   w        (D)        the scoring projection, CCT's attention_pool
//   weights  (B, T)     weights[b, t] = softmax_t(x[b, t] . w), cached for backward
//   pooled   (B, D)     pooled[b] = sum_t weights[b, t] x[b, t]
namespace minivit {
MINIVIT_ISA_BEGIN

void seq_pool_forward(float* pooled, float* weights, const float* x, const float* w, int B,
                      int T, int D);

// Adds the gradients at x (B, T, D) and w (D) into dx and dw. score_grads (B, T) is
// scratch: the gradient at each token's score. dw is summed over the images in one fixed
// order, so it does not depend on the thread count.
void seq_pool_backward(float* dx, float* dw, const float* dpooled,
                       const float* weights, const float* x, const float* w, int B, int T,
                       int D, float* score_grads);

MINIVIT_ISA_END
}  // namespace minivit
