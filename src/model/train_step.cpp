#include "minivit/model/train_step.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "minivit/nn/cross_entropy.h"

namespace minivit {

// Runs body(), adding its seconds to the profile's `phase` when there is a profile.
template <class Body>
static void timed(StepProfile* profile, double StepProfile::*phase, Body&& body) {
  if (!profile) return body();
  const auto start = std::chrono::steady_clock::now();
  body();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  profile->*phase += took.count();
}

float forward_backward(ViT& model, Activations& acts, const float* images, const float* targets,
                       int B, uint64_t dropout_key, int first_sample) {
  const int K = model.config.num_classes;
  float loss = 0.0f;
  timed(acts.profile, &StepProfile::clear_seconds, [&] { model.zero_grad(); });
  timed(acts.profile, &StepProfile::forward_seconds, [&] {
    vit_forward(model, acts, images, B, true, dropout_key, first_sample);
    loss = cross_entropy_forward(acts.probs, acts.logits, targets, B, K);
  });
  timed(acts.profile, &StepProfile::backward_seconds, [&] {
    std::memset(acts.dlogits, 0, sizeof(float) * size_t(B) * size_t(K));
    cross_entropy_backward(acts.dlogits, acts.probs, targets, B, K);
    vit_backward(model, acts, B);
  });
  return loss;
}

StepResult shard_gradients(ViT& model, Activations& acts, const float* images,
                           const float* targets, const int32_t* labels, int B,
                           uint64_t dropout_key, int first_sample, int global_batch) {
  StepResult r;
  r.loss = forward_backward(model, acts, images, targets, B, dropout_key, first_sample);
  const int K = model.config.num_classes;
  for (int b = 0; b < B; ++b) {
    const float* z = acts.logits + int64_t(b) * K;
    r.correct += int(std::max_element(z, z + K) - z) == labels[b];
  }
  // The loss backward divides by this shard's B; the whole batch's mean divides by
  // global_batch. A whole batch is left untouched, so one process repeats itself bit for bit.
  if (B != global_batch) {
    const float scale = float(B) / float(global_batch);
    float* g = model.grads.data();
    for (int64_t i = 0; i < model.num_params; ++i) g[i] *= scale;
  }
  return r;
}

void apply_gradients(ViT& model, Optimizer& optimizer, StepResult& r, float lr,
                     float clip_grad_norm_max) {
  r.grad_norm = grad_global_norm(model);
  r.finite = std::isfinite(r.loss) && std::isfinite(r.grad_norm);
  // The clipping is the update's first multiply rather than a pass over the gradients.
  if (r.finite) optimizer.step(model, lr, clip_scale(r.grad_norm, clip_grad_norm_max));
}

StepResult train_step(ViT& model, Activations& acts, Optimizer& optimizer, const float* images,
                      const float* targets, const int32_t* labels, int B, float lr,
                      float clip_grad_norm_max, uint64_t dropout_key) {
  StepResult r = shard_gradients(model, acts, images, targets, labels, B, dropout_key, 0, B);
  timed(acts.profile, &StepProfile::update_seconds,
        [&] { apply_gradients(model, optimizer, r, lr, clip_grad_norm_max); });
  return r;
}

std::string first_nonfinite_grad(const ViT& model) {
  for (const ParamSpec& s : model.specs) {
    const float* g = model.grads.data() + s.offset;
    for (int64_t i = 0; i < s.size; ++i)
      if (!std::isfinite(g[i])) return s.name;
  }
  return "";
}

}  // namespace minivit
