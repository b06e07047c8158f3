// train.precision = "bf16": the transformer blocks' products take bf16-rounded inputs in
// training passes (a linear layer's own rounding: nn/test_linear_precision.cpp). The model's
// gradients stay near fp32's (the inputs lose 8 bits of mantissa, the
// sums none), evaluation passes stay fp32 bit for bit, and a run repeats bit for bit on one
// thread or two.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "model_gradcheck.h"
#include "minivit/kernels/compute.h"
#include "minivit/model/optimizer.h"
#include "minivit/model/train_step.h"
#include "minivit/model/vit.h"

using namespace minivit;
using namespace minivit_test;

namespace {

// The default config's block shapes on fewer blocks: products wide enough to take every
// path of the kernels (several 64-column panels, 6-row tiles, odd reductions none).
ModelConfig fashion_like_config() {
  ModelConfig c = tiny_model_config();
  c.image_size = 28;
  c.channels = 1;
  c.patch_size = 4;
  c.dim = 64;
  c.depth = 2;
  c.heads = 4;
  c.mlp_dim = 128;
  c.num_classes = 10;
  c.dropout = 0.1f;
  return c;
}

struct Batch {
  int B;
  std::vector<float> images, targets;
  std::vector<int32_t> labels;
  Batch(const ModelConfig& c, int B_) : B(B_), targets(size_t(B_) * c.num_classes) {
    images = random_vector(size_t(B) * c.channels * c.image_size * c.image_size, 1.0f, 21);
    for (int b = 0; b < B; ++b) labels.push_back(b % c.num_classes);
    make_targets(targets.data(), labels.data(), B, c.num_classes, 0.1f);
  }
};

// Whether the run state's kernels (the fastest this CPU runs) compute bf16 products.
bool bf16_products_here() { return Compute::automatic().bf16_products(); }

std::vector<float> gradients(ViT& model, const Batch& batch, Precision precision) {
  Activations acts(model.config, batch.B, ActivationsFor::training);
  acts.block_products = precision;
  model.zero_grad();
  forward_backward(model, acts, batch.images.data(), batch.targets.data(), batch.B, 7);
  return std::vector<float>(model.grads.begin(), model.grads.end());
}

}  // namespace

TEST_CASE("bf16 block products keep every gradient near fp32's", "[model][precision]") {
  const ModelConfig c = fashion_like_config();
  ViT model(c);
  model.init(3);
  const Batch batch(c, 8);
  const std::vector<float> fp32 = gradients(model, batch, Precision::fp32);
  const std::vector<float> bf16 = gradients(model, batch, Precision::bf16);
  bool any_differs = false;
  for (const ParamSpec& s : model.specs) {
    if (!s.trainable) continue;
    double diff = 0.0, norm = 0.0;
    for (int64_t i = s.offset; i < s.offset + s.size; ++i) {
      diff += std::pow(double(bf16[size_t(i)]) - fp32[size_t(i)], 2);
      norm += std::pow(double(fp32[size_t(i)]), 2);
      any_differs |= bf16[size_t(i)] != fp32[size_t(i)];
    }
    INFO(s.name << ": |bf16 - fp32| / |fp32| = " << std::sqrt(diff / norm));
    REQUIRE(norm > 0.0);
    // bf16's unit roundoff is 2^-9; through four products and back it stays within 2%.
    CHECK(std::sqrt(diff / norm) < 2e-2);
  }
  // Where the kernels in use have no bf16 products the request runs in fp32, bit for bit.
  CHECK(any_differs == bf16_products_here());
}

TEST_CASE("bf16 block products leave evaluation passes in fp32", "[model][precision]") {
  const ModelConfig c = fashion_like_config();
  ViT model(c);
  model.init(4);
  const Batch batch(c, 5);
  Activations fp32(c, batch.B, ActivationsFor::training);
  Activations bf16(c, batch.B, ActivationsFor::training);
  bf16.block_products = Precision::bf16;
  vit_forward(model, fp32, batch.images.data(), batch.B, false, 0);
  vit_forward(model, bf16, batch.images.data(), batch.B, false, 0);
  const int64_t logits = int64_t(batch.B) * c.num_classes;
  CHECK(std::vector<float>(fp32.logits, fp32.logits + logits) ==
        std::vector<float>(bf16.logits, bf16.logits + logits));
  // A training pass through the same run state does round.
  vit_forward(model, bf16, batch.images.data(), batch.B, true, 0);
  vit_forward(model, fp32, batch.images.data(), batch.B, true, 0);
  const bool same = std::vector<float>(fp32.logits, fp32.logits + logits) ==
                    std::vector<float>(bf16.logits, bf16.logits + logits);
  CHECK(same == !bf16_products_here());
}

TEST_CASE("training with bf16 block products repeats bit for bit on one thread and two",
          "[model][precision][train]") {
  const ModelConfig c = fashion_like_config();
  const Batch batch(c, 16);
  auto run = [&](int threads) {
    ViT model(c);
    model.init(11);
    Activations acts(c, batch.B, ActivationsFor::training);
    acts.block_products = Precision::bf16;
    acts.compute.threads = threads;
    Optimizer opt(OptimConfig{}, model.num_params);
    for (int step = 0; step < 3; ++step)
      train_step(model, acts, opt, batch.images.data(), batch.targets.data(),
                 batch.labels.data(), batch.B, 1e-3f, 1.0f, rng_key(1, kRngDropout, uint64_t(step)));
    return std::vector<float>(model.weights.begin(), model.weights.end());
  };
  CHECK(run(1) == run(2));
}
