#pragma once
// Optimisers over the model's flat parameter buffer: AdamW (decoupled weight decay, as
// PyTorch's torch.optim.AdamW) and SGD with momentum (as torch.optim.SGD, weight decay added
// to the gradient). Weight decay touches only parameters whose spec says so (weight
// matrices), never biases, LayerNorm, the CLS token or the position embedding. Parameters
// the table marks as not trainable (a fixed position table) are skipped altogether: no
// step, no decay, their moments stay zero.
#include <cstdint>

#include "minivit/core/config.h"
#include "minivit/core/tensor.h"
#include "minivit/model/vit.h"

namespace minivit {

// Learning rate for optimizer step `step` (0-based) of `total_steps`: linear warm-up from
// lr / warmup_steps to lr over the first warmup_steps, then cosine decay to min_lr at the
// last step, or constant.
float learning_rate(const OptimConfig& config, int64_t step, int64_t total_steps);

// Global L2 norm of the gradients, summed in double in pieces cut by the parameter count
// alone, so it is the same on any number of threads.
double grad_global_norm(const ViT& model);

// What clipping multiplies the gradients by so that their global norm `norm` is at most
// max_norm, as torch.nn.utils.clip_grad_norm_: max_norm / (norm + 1e-6) when norm is above
// it, else 1 (also when max_norm <= 0, no clipping, or norm is not finite).
float clip_scale(double norm, double max_norm);

// Scales gradients so their global norm is at most max_norm; returns the norm before.
double clip_grad_norm(ViT& model, double max_norm);

// The decay of the weights' moving average at its `updates`-th update (1-based): the
// configured one, held lower at first as TensorFlow's ExponentialMovingAverage does with
// num_updates, min(decay, (1 + n) / (10 + n)), so the average forgets the random
// initialisation within the first few hundred steps rather than over 1 / (1 - decay).
float average_decay(float decay, int64_t updates);

struct Optimizer {
  OptimConfig config;
  Tensor1 m;  // (num_params) Adam first moment, or SGD momentum buffer
  Tensor1 v;  // (num_params) Adam second moment (unused by SGD)
  int64_t steps_taken = 0;  // for Adam's bias correction
  // (num_params) moving average of the weights when config.ema_decay > 0, else empty. It
  // starts from the weights the first step finds (the initialisation, --init's, or a
  // resumed run's when its state had no average) and follows every step after.
  Tensor1 average;
  int64_t average_updates = 0;  // 0: not started

  Optimizer(const OptimConfig& config, int64_t num_params);
  // One update from model.grads, each gradient first multiplied by grad_scale (clipping's,
  // clip_scale; the same float product clip_grad_norm would store, so the same bits,
  // without a pass of its own over the gradients).
  void step(ViT& model, float lr, float grad_scale = 1.0f);

 private:
  void update_average(const ViT& model);
};

}  // namespace minivit
