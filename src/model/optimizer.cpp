#include "minivit/model/optimizer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "minivit/core/error.h"
#include "minivit/kernels/threads.h"

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

namespace {

// The squared norm is summed in this many pieces of the parameters, cut by the parameter
// count alone, so its rounding is the same on any number of threads or ranks.
constexpr int kNormPieces = 64;

// Below this many parameters the norm and the update run on the calling thread: a parallel
// region costs more than it saves.
constexpr int64_t kMinSplitParams = 1 << 15;

// The sum of g[i]^2 over [begin, end) in eight interleaved double lanes, then the lanes in a
// fixed tree. One running sum is a chain of dependent additions, four cycles each: over the
// default model's parameters it took about 40% of the update's time on one thread.
double sum_of_squares(const float* g, int64_t begin, int64_t end) {
  double lane[8] = {};
  int64_t i = begin;
  for (; i + 8 <= end; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] += double(g[i + j]) * g[i + j];
  for (int j = 0; i < end; ++i, ++j) lane[j] += double(g[i]) * g[i];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// Calls body(begin, end) over pieces of [0, n) across the pool, or once where n is small.
// For work on each element alone: the bits do not depend on the cut.
template <class Body>
void for_params(int64_t n, Body&& body) {
  for_ranges(n, n >= kMinSplitParams, body);
}

// Calls body(spec, lo, hi) for the part [lo, hi) of [begin, end) that each trainable
// parameter holds.
template <class Body>
void for_trainable(const ViT& model, int64_t begin, int64_t end, Body&& body) {
  for (const ParamSpec& s : model.specs) {
    if (!s.trainable) continue;
    const int64_t lo = std::max(begin, s.offset), hi = std::min(end, s.offset + s.size);
    if (lo < hi) body(s, lo, hi);
  }
}

// One AdamW step's numbers. The element loops below take them, and the buffers, as values
// and __restrict pointers: read through a lambda's references, each could be changed by any
// float store, so the loop would reload them and run one float at a time (4x slower).
struct AdamwStep {
  float b1, b2;        // the moments' decays
  float bias1, bias2;  // 1 - b1^t and 1 - b2^t
  float lr;
  float decay;         // 1 - lr * weight_decay on a decayed parameter, else 1
  float grad_scale;    // clipping's factor, 1 when it does not clip
};

void adamw_elements(float* __restrict w, float* __restrict m, float* __restrict v,
                    const float* __restrict g, int64_t lo, int64_t hi, AdamwStep k) {
  constexpr float eps = 1e-8f;
  for (int64_t i = lo; i < hi; ++i) {
    // Only ever multiplied, so the product is rounded as clip_grad_norm would store it.
    const float grad = g[i] * k.grad_scale;
    m[i] = k.b1 * m[i] + (1.0f - k.b1) * grad;
    v[i] = k.b2 * v[i] + (1.0f - k.b2) * grad * grad;
    const float m_hat = m[i] / k.bias1;
    const float v_hat = v[i] / k.bias2;
    w[i] = w[i] * k.decay - k.lr * m_hat / (std::sqrt(v_hat) + eps);
  }
}

// SGD: the weight decay wd added to the gradient, then momentum mu (none at 0), its buffer
// m starting from the first step's gradient.
void sgd_elements(float* __restrict w, float* __restrict m, const float* __restrict g,
                  int64_t lo, int64_t hi, float lr, float wd, float mu, bool first_step) {
  for (int64_t i = lo; i < hi; ++i) {
    const float grad = g[i] + wd * w[i];
    if (mu > 0.0f) {
      m[i] = first_step ? grad : mu * m[i] + grad;
      w[i] -= lr * m[i];
    } else {
      w[i] -= lr * grad;
    }
  }
}

// g *= scale over every gradient, each element alone.
void scale_gradients(ViT& model, float scale) {
  float* g = model.grads.data();
  for_params(model.num_params, [g, scale](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) g[i] *= scale;
  });
}

}  // namespace

double grad_global_norm(const ViT& model) {
  const float* g = model.grads.data();
  const int64_t n = model.num_params;
  double piece_sums[kNormPieces];
  for_ranges(kNormPieces, n >= kMinSplitParams, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      piece_sums[p] = sum_of_squares(g, n * p / kNormPieces, n * (p + 1) / kNormPieces);
  });
  double sum = 0.0;
  for (double piece : piece_sums) sum += piece;
  return std::sqrt(sum);
}

float clip_scale(double norm, double max_norm) {
  return max_norm > 0.0 && norm > max_norm ? float(max_norm / (norm + 1e-6)) : 1.0f;
}

double clip_grad_norm(ViT& model, double max_norm) {
  const double norm = grad_global_norm(model);
  const float scale = clip_scale(norm, max_norm);
  if (scale != 1.0f) scale_gradients(model, scale);
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
// fixed ones stay what they are), each element on its own, so it rounds the same on any
// number of threads or ranks.
void Optimizer::update_average(const ViT& model) {
  if (config.ema_decay <= 0.0f) return;
  const float* w = model.weights.data();
  float* avg = average.data();
  ++average_updates;
  const float d = average_decay(config.ema_decay, average_updates);
  for_params(model.num_params, [avg, w, d](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) avg[i] = d * avg[i] + (1.0f - d) * w[i];
  });
}

void Optimizer::step(ViT& model, float lr, float grad_scale) {
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
    AdamwStep k{c.beta1, c.beta2, 0.0f, 0.0f, lr, 1.0f, grad_scale};
    k.bias1 = 1.0f - float(std::pow(double(k.b1), double(steps_taken)));
    k.bias2 = 1.0f - float(std::pow(double(k.b2), double(steps_taken)));
    const float decay = 1.0f - lr * c.weight_decay;
    for_params(model.num_params, [&](int64_t begin, int64_t end) {
      for_trainable(model, begin, end, [&](const ParamSpec& s, int64_t lo, int64_t hi) {
        AdamwStep here = k;
        if (s.decay) here.decay = decay;
        adamw_elements(w, m_, v_, g, lo, hi, here);
      });
    });
  } else {  // sgd
    // SGD adds the weight decay to the gradient, an add the compiler may fuse with the
    // scaling's multiply, rounding otherwise than clip_grad_norm's stored product: the
    // gradients are scaled first, in their own pass.
    if (grad_scale != 1.0f) scale_gradients(model, grad_scale);
    for_params(model.num_params, [&](int64_t begin, int64_t end) {
      for_trainable(model, begin, end, [&](const ParamSpec& s, int64_t lo, int64_t hi) {
        sgd_elements(w, m_, g, lo, hi, lr, s.decay ? c.weight_decay : 0.0f, c.momentum,
                     steps_taken == 1);
      });
    });
  }
  update_average(model);
}

}  // namespace minivit
