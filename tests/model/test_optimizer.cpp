// AdamW and SGD against their textbook (PyTorch) update rules, the schedule, clipping.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "gradcheck.h"
#include "minivit/kernels/threads.h"
#include "minivit/model/optimizer.h"
#include "minivit/model/vit.h"

using namespace minivit;

static ModelConfig small() {
  ModelConfig c;
  c.image_size = 4;
  c.channels = 1;
  c.patch_size = 2;
  c.dim = 4;
  c.depth = 1;
  c.heads = 2;
  c.mlp_dim = 4;
  c.num_classes = 2;
  return c;
}

// w -= lr * g: no momentum, no weight decay.
static OptimConfig plain_sgd() {
  OptimConfig c;
  c.name = OptimizerKind::sgd;
  c.momentum = 0.0f;
  c.weight_decay = 0.0f;
  return c;
}

TEST_CASE("AdamW: two steps match torch.optim.AdamW's rule, decay on matrices only", "[optim]") {
  ViT model(small());
  for (int64_t i = 0; i < model.num_params; ++i) model.weights.data()[i] = 0.5f;
  OptimConfig oc;
  oc.name = OptimizerKind::adamw;
  oc.weight_decay = 0.1f;
  oc.beta1 = 0.9f;
  oc.beta2 = 0.99f;
  Optimizer opt(oc, model.num_params);
  const float lr = 0.01f;
  const float g1 = 0.2f, g2 = -0.4f;
  for (float g : {g1, g2}) {
    for (int64_t i = 0; i < model.num_params; ++i) model.grads.data()[i] = g;
    opt.step(model, lr);
  }
  auto expected = [&](bool decay) {
    double w = 0.5, m = 0, v = 0;
    int t = 0;
    for (double g : {double(g1), double(g2)}) {
      ++t;
      if (decay) w *= 1 - lr * 0.1;
      m = 0.9 * m + 0.1 * g;
      v = 0.99 * v + 0.01 * g * g;
      const double mh = m / (1 - std::pow(0.9, t)), vh = v / (1 - std::pow(0.99, t));
      w -= lr * mh / (std::sqrt(vh) + 1e-8);
    }
    return w;
  };
  const ParamSpec* qkv_w = model.find("blocks.0.attn.qkv.weight");
  const ParamSpec* qkv_b = model.find("blocks.0.attn.qkv.bias");
  CHECK(model.weights.data()[qkv_w->offset] == Approx(expected(true)).epsilon(1e-6));
  CHECK(model.weights.data()[qkv_b->offset] == Approx(expected(false)).epsilon(1e-6));
  CHECK(expected(true) != Approx(expected(false)).epsilon(1e-7));
}

TEST_CASE("SGD with momentum matches torch.optim.SGD", "[optim]") {
  ViT model(small());
  for (int64_t i = 0; i < model.num_params; ++i) model.weights.data()[i] = 1.0f;
  OptimConfig oc;
  oc.name = OptimizerKind::sgd;
  oc.momentum = 0.9f;
  oc.weight_decay = 0.01f;
  Optimizer opt(oc, model.num_params);
  const float lr = 0.1f;
  for (int step = 0; step < 2; ++step) {
    for (int64_t i = 0; i < model.num_params; ++i) model.grads.data()[i] = 0.5f;
    opt.step(model, lr);
  }
  // Decayed parameter: g = 0.5 + 0.01 w; buf1 = g1; w1 = 1 - 0.1 g1; buf2 = 0.9 buf1 + g2.
  const double g1 = 0.5 + 0.01 * 1.0, w1 = 1.0 - 0.1 * g1;
  const double g2 = 0.5 + 0.01 * w1, w2 = w1 - 0.1 * (0.9 * g1 + g2);
  CHECK(model.weights.data()[model.find("head.weight")->offset] == Approx(w2).epsilon(1e-6));
  CHECK(model.weights.data()[model.find("head.bias")->offset] == Approx(1.0 - 0.1 * 0.5 - 0.1 * (0.9 * 0.5 + 0.5)).epsilon(1e-6));
}

TEST_CASE("plain SGD is w -= lr * g", "[optim]") {
  ViT model(small());
  Optimizer opt(plain_sgd(), model.num_params);
  for (int64_t i = 0; i < model.num_params; ++i) {
    model.weights.data()[i] = float(i);
    model.grads.data()[i] = 1.0f;
  }
  opt.step(model, 0.25f);
  for (int64_t i = 0; i < model.num_params; ++i) REQUIRE(model.weights.data()[i] == float(i) - 0.25f);
}

TEST_CASE("learning-rate schedule: warm-up, cosine to min_lr, constant", "[optim]") {
  OptimConfig c;
  c.lr = 1.0f;
  c.min_lr = 0.1f;
  c.warmup_steps = 4;
  c.schedule = LrSchedule::cosine;
  CHECK(learning_rate(c, 0, 104) == Approx(0.25));
  CHECK(learning_rate(c, 3, 104) == Approx(1.0));
  CHECK(learning_rate(c, 4, 104) == Approx(1.0));
  CHECK(learning_rate(c, 103, 104) == Approx(0.1));
  CHECK(learning_rate(c, 4 + 99 / 2.0, 104) == Approx(0.55).epsilon(0.02));
  for (int s = 5; s < 104; ++s) CHECK(learning_rate(c, s, 104) <= learning_rate(c, s - 1, 104));
  c.schedule = LrSchedule::constant;
  CHECK(learning_rate(c, 50, 104) == 1.0f);
  c.warmup_steps = 0;
  CHECK(learning_rate(c, 0, 104) == 1.0f);
}

TEST_CASE("gradient clipping scales to the global norm", "[optim]") {
  ViT model(small());
  for (int64_t i = 0; i < model.num_params; ++i) model.grads.data()[i] = 1.0f;
  const double norm = std::sqrt(double(model.num_params));
  CHECK(clip_grad_norm(model, 0.0) == Approx(norm));  // 0 = off: unchanged
  CHECK(model.grads.data()[0] == 1.0f);
  CHECK(clip_grad_norm(model, 1.0) == Approx(norm));
  CHECK(grad_global_norm(model) == Approx(1.0).epsilon(1e-5));
  CHECK(clip_grad_norm(model, 10.0 * norm) == Approx(1.0).epsilon(1e-5));  // below max: untouched
}

TEST_CASE("the weights' moving average starts at the weights the first step finds and follows "
          "timm's rule, with TensorFlow's early decay",
          "[optim][ema]") {
  CHECK(average_decay(0.999f, 1) == Approx(2.0 / 11.0));
  CHECK(average_decay(0.999f, 90) == Approx(91.0 / 100.0));
  CHECK(average_decay(0.9f, 1000) == 0.9f);  // the configured decay once it is the smaller

  ViT model(small());
  OptimConfig oc = plain_sgd();
  oc.ema_decay = 0.5f;
  Optimizer opt(oc, model.num_params);
  REQUIRE(opt.average_updates == 0);
  for (int64_t i = 0; i < model.num_params; ++i) model.weights.data()[i] = 1.0f;
  // Three steps of w -= 0.25: the weights go 1 -> 0.75 -> 0.5 -> 0.25.
  double average = 1.0;
  for (int step = 1; step <= 3; ++step) {
    for (int64_t i = 0; i < model.num_params; ++i) model.grads.data()[i] = 1.0f;
    opt.step(model, 0.25f);
    const double d = std::min(0.5, (1.0 + step) / (10.0 + step));
    average = d * average + (1 - d) * (1.0 - 0.25 * step);
  }
  CHECK(opt.average_updates == 3);
  const ParamSpec* fixed_free = model.find("head.weight");
  CHECK(opt.average.data()[fixed_free->offset] == Approx(average).epsilon(1e-6));
  CHECK(model.weights.data()[fixed_free->offset] == 0.25f);  // the weights themselves untouched

  // Off: no buffer, nothing kept.
  oc.ema_decay = 0.0f;
  Optimizer plain(oc, model.num_params);
  plain.step(model, 0.25f);
  CHECK(plain.average.size() == 0);
  CHECK(plain.average_updates == 0);
}

// Large enough (about 100k parameters) that the norm, the clipping, the step and the average
// split over the pool.
static ModelConfig wide() {
  ModelConfig c = small();
  c.image_size = 8;
  c.dim = 64;
  c.depth = 2;
  c.heads = 4;
  c.mlp_dim = 128;
  return c;
}

// Three clipped steps from the same weights and gradients on `threads` threads: the weights,
// moments, average and each step's norm. The clipping scales the gradients in a pass of its
// own (clip_grad_norm), or with scale_in_step is the step's factor (clip_scale), as
// training clips.
struct UpdateResult {
  std::vector<float> weights, m, v, average;
  std::vector<double> norms;
};

static UpdateResult three_updates(OptimizerKind kind, int threads, bool scale_in_step = false) {
  const int restore = num_threads();
  set_num_threads(threads);
  ViT model(wide());
  OptimConfig oc;
  oc.name = kind;
  oc.momentum = 0.9f;
  oc.weight_decay = 0.05f;
  oc.ema_decay = 0.99f;
  Optimizer opt(oc, model.num_params);
  minivit_test::fill_random(model.weights.data(), model.num_params, 0.02f, 7);
  UpdateResult r;
  for (int step = 0; step < 3; ++step) {
    minivit_test::fill_random(model.grads.data(), model.num_params, 0.01f, 8 + step);
    if (scale_in_step) {
      r.norms.push_back(grad_global_norm(model));
      opt.step(model, 1e-3f, clip_scale(r.norms.back(), 0.1));
    } else {
      r.norms.push_back(clip_grad_norm(model, 0.1));
      opt.step(model, 1e-3f);
    }
  }
  auto copy = [](const float* p, size_t n) { return std::vector<float>(p, p + n); };
  const size_t n = size_t(model.num_params);
  r.weights = copy(model.weights.data(), n);
  r.m = copy(opt.m.data(), n);
  r.v = copy(opt.v.data(), n);
  r.average = copy(opt.average.data(), n);
  set_num_threads(restore);
  return r;
}

static bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Two runs of three_updates agree bit for bit, each of their steps clipped.
static void check_same_updates(const UpdateResult& a, const UpdateResult& b) {
  CHECK(a.norms == b.norms);
  CHECK(a.norms[0] > 0.1);  // every step clipped
  CHECK(same_bits(a.weights, b.weights));
  CHECK(same_bits(a.m, b.m));
  CHECK(same_bits(a.v, b.v));
  CHECK(same_bits(a.average, b.average));
}

TEST_CASE("above 32k parameters the norm, clipping, step and average split over the pool, "
          "the same bits on 1 and 2 threads",
          "[optim]") {
  REQUIRE(ViT(wide()).num_params > (1 << 15));
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::sgd}) {
    INFO((kind == OptimizerKind::adamw ? "adamw" : "sgd"));
    check_same_updates(three_updates(kind, 1), three_updates(kind, 2));
  }
}

TEST_CASE("clipping as the step's factor gives the bits of clipping the gradients first",
          "[optim]") {
  CHECK(clip_scale(2.0, 1.0) == float(1.0 / (2.0 + 1e-6)));
  CHECK(clip_scale(0.5, 1.0) == 1.0f);  // below max: untouched
  CHECK(clip_scale(2.0, 0.0) == 1.0f);  // 0 = off
  CHECK(clip_scale(std::nan(""), 1.0) == 1.0f);
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::sgd}) {
    INFO((kind == OptimizerKind::adamw ? "adamw" : "sgd"));
    check_same_updates(three_updates(kind, 2), three_updates(kind, 2, true));
  }
}

TEST_CASE("the gradient norm's pieces cover every parameter once", "[optim]") {
  for (const ModelConfig& c : {small(), wide()}) {
    ViT model(c);
    for (int64_t i = 0; i < model.num_params; ++i) model.grads.data()[i] = 1.0f;
    CHECK(grad_global_norm(model) == std::sqrt(double(model.num_params)));  // sums of ones: exact
    model.grads.data()[model.num_params - 1] = 3.0f;  // the last element counts, once
    CHECK(grad_global_norm(model) == std::sqrt(double(model.num_params + 8)));
  }
}
