#include "minivit/model/optimizer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "minivit/core/error.h"

namespace minivit {

float learning_rate(const OptimConfig& c, int64_t step, int64_t total_steps) {
  if (step < c.warmup_steps) return c.lr * float(step + 1) / float(c.warmup_steps);
  if (c.schedule == LrSchedule::constant) return c.lr;
  const int64_t decay_steps = total_steps - c.warmup_steps;
  if (decay_steps <= 1) return c.lr;
  const double progress = double(step - c.warmup_steps) / double(decay_steps - 1);
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * std::min(progress, 1.0)));
  return float(c.min_lr + (c.lr - c.min_lr) * cosine);
}

double grad_global_norm(const ViT& model) {
  const float* g = model.grads.data();
  double sum = 0.0;
  for (int64_t i = 0; i < model.num_params; ++i) sum += double(g[i]) * g[i];
  return std::sqrt(sum);
}

double clip_grad_norm(ViT& model, double max_norm) {
  const double norm = grad_global_norm(model);
  if (max_norm > 0.0 && norm > max_norm) {
    const float scale = float(max_norm / (norm + 1e-6));  // torch.nn.utils.clip_grad_norm_
    float* g = model.grads.data();
    for (int64_t i = 0; i < model.num_params; ++i) g[i] *= scale;
  }
  return norm;
}

float average_decay(float decay, int64_t updates) {
  return std::min(decay, float(double(1 + updates) / double(10 + updates)));
}

Optimizer::Optimizer(const OptimConfig& c, int64_t num_params) : config(c) {
  m = Tensor1::from_shape({size_t(num_params)});
  v = Tensor1::from_shape({size_t(num_params)});
  m.fill(0.0f);
  v.fill(0.0f);
  if (c.ema_decay > 0.0f) {
    average = Tensor1::from_shape({size_t(num_params)});
    average.fill(0.0f);
  }
}

// timm's ModelEmaV2: average = d * average + (1 - d) * weights, over every parameter (the
// fixed ones stay what they are), one element at a time, so it rounds the same on any
// number of threads or ranks.
void Optimizer::update_average(const ViT& model) {
  if (config.ema_decay <= 0.0f) return;
  const float* w = model.weights.data();
  float* avg = average.data();
  ++average_updates;
  const float d = average_decay(config.ema_decay, average_updates);
  for (int64_t i = 0; i < model.num_params; ++i) avg[i] = d * avg[i] + (1.0f - d) * w[i];
}

void Optimizer::step(ViT& model, float lr) {
  if (int64_t(m.size()) != model.num_params)
    throw Error("optimizer: its moments hold " + std::to_string(m.size()) +
                " numbers, but the model has " + std::to_string(model.num_params) + " parameters");
  if (config.ema_decay > 0.0f && average_updates == 0)
    std::copy(model.weights.data(), model.weights.data() + model.num_params, average.data());
  ++steps_taken;
  float* w = model.weights.data();
  const float* g = model.grads.data();
  float* m_ = m.data();
  float* v_ = v.data();
  const OptimConfig& c = config;
  if (c.name == OptimizerKind::adamw) {
    const float b1 = c.beta1, b2 = c.beta2, eps = 1e-8f;
    const float bias1 = 1.0f - float(std::pow(double(b1), double(steps_taken)));
    const float bias2 = 1.0f - float(std::pow(double(b2), double(steps_taken)));
    for (const ParamSpec& s : model.specs) {
      if (!s.trainable) continue;
      const float decay = s.decay ? 1.0f - lr * c.weight_decay : 1.0f;
      for (int64_t i = s.offset; i < s.offset + s.size; ++i) {
        m_[i] = b1 * m_[i] + (1.0f - b1) * g[i];
        v_[i] = b2 * v_[i] + (1.0f - b2) * g[i] * g[i];
        const float m_hat = m_[i] / bias1;
        const float v_hat = v_[i] / bias2;
        w[i] = w[i] * decay - lr * m_hat / (std::sqrt(v_hat) + eps);
      }
    }
  } else {  // sgd
    const float mu = c.momentum;
    for (const ParamSpec& s : model.specs) {
      if (!s.trainable) continue;
      const float wd = s.decay ? c.weight_decay : 0.0f;
      for (int64_t i = s.offset; i < s.offset + s.size; ++i) {
        const float grad = g[i] + wd * w[i];
        if (mu > 0.0f) {
          m_[i] = steps_taken == 1 ? grad : mu * m_[i] + grad;
          w[i] -= lr * m_[i];
        } else {
          w[i] -= lr * grad;
        }
      }
    }
  }
  update_average(model);
}

}  // namespace minivit
