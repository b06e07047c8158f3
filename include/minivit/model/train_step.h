#pragma once
// One optimisation step: forward, loss, backward, clipping, update. Shared by the trainer,
// the benchmark and the tests, so all three measure and check the same code.
#include <cstdint>

#include "minivit/model/optimizer.h"
#include "minivit/model/vit.h"

namespace minivit {

struct StepResult {
  float loss = 0.0f;
  int correct = 0;          // argmax(logits) == label
  double grad_norm = 0.0;   // before clipping
  bool finite = true;       // loss and gradient norm are finite (else no update was made)
};

// images (B, C, S, S) normalised; targets (B, K) distributions; labels (B) for accuracy.
StepResult train_step(ViT& model, Activations& acts, Optimizer& optimizer, const float* images,
                      const float* targets, const int32_t* labels, int B, float lr,
                      float clip_grad_norm, uint64_t dropout_key);

// A step split over several processes (train/distributed.h) is these two halves with the
// sum of every process's gradients between them.
//
// The first half for images first_sample .. first_sample + B - 1 of a batch of
// global_batch: forward with those images' dropout masks, loss and backward, the gradient
// scaled by B / global_batch so that the processes' sum is the gradient of the mean loss
// over the whole batch. Returns this shard's mean loss and its correct count; grad_norm and
// finite are left for the second half.
StepResult shard_gradients(ViT& model, Activations& acts, const float* images,
                           const float* targets, const int32_t* labels, int B,
                           uint64_t dropout_key, int first_sample, int global_batch);
// The second half, once model.grads holds the whole batch's gradient and `r` its loss:
// clipping, the finiteness check and, when finite, the update.
void apply_gradients(ViT& model, Optimizer& optimizer, StepResult& r, float lr,
                     float clip_grad_norm);

// Forward, loss and backward only (gradients left in model.grads); returns the loss.
float forward_backward(ViT& model, Activations& acts, const float* images, const float* targets,
                       int B, uint64_t dropout_key, int first_sample = 0);

// Name of the first parameter tensor holding a non-finite gradient, or "" if none.
std::string first_nonfinite_grad(const ViT& model);

}  // namespace minivit
