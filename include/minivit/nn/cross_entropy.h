#pragma once
// Softmax cross-entropy against target distributions (B, K): one-hot labels, labels with
// smoothing, or mixed targets all go through the same loss.
//   loss = mean_b  -sum_k targets[b,k] * log softmax(logits[b])_k
#include <cstdint>

namespace minivit {

// Caches probs (B, K) for backward; returns the mean loss over the batch.
float cross_entropy_forward(float* probs, const float* logits, const float* targets, int B,
                            int K);

// dlogits (B, K) += (probs - targets) / B
void cross_entropy_backward(float* dlogits, const float* probs, const float* targets, int B,
                            int K);

// targets (B, K) = (1 - smoothing) * one_hot(labels) + smoothing / K, as PyTorch's
// CrossEntropyLoss(label_smoothing=...) and timm's LabelSmoothingCrossEntropy define it.
void make_targets(float* targets, const int32_t* labels, int B, int K, float smoothing);

}  // namespace minivit
