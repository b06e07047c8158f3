// train.precision = "bf16": the transformer blocks' products take bf16-rounded inputs in
// training passes. A linear layer rounds exactly the operands of each of its three
// products; the model's gradients stay near fp32's (the inputs lose 8 bits of mantissa, the
// sums none), evaluation passes stay fp32 bit for bit, and a run repeats bit for bit on one
// thread or two.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "model_gradcheck.h"
#include "minivit/kernels/gemm.h"
#include "minivit/kernels/threads.h"
#include "minivit/model/optimizer.h"
#include "minivit/model/train_step.h"
#include "minivit/model/vit.h"
#include "minivit/nn/linear.h"

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

// x as a bf16 product takes it: rounded to bf16, or itself where the kernels in use have no
// bf16 products, which then run in fp32.
float as_product_input(float x) { return bf16_products_available() ? round_to_bf16(x) : x; }

std::vector<float> gradients(ViT& model, const Batch& batch, Precision precision) {
  Activations acts(model.config, batch.B, true);
  acts.block_products = precision;
  model.zero_grad();
  forward_backward(model, acts, batch.images.data(), batch.targets.data(), batch.B, 7);
  return std::vector<float>(model.grads.begin(), model.grads.end());
}

}  // namespace

TEST_CASE("a bf16 linear layer rounds the operands of each product and nothing else",
          "[layers][linear][precision]") {
  // out = x W^T + b from round(x), round(W); dx = round(g) round(W); dW = round(g)^T round(x);
  // db = 1^T g, unrounded. Each against a double sum of the same terms.
  const int R = 70, I = 40, O = 72;
  const auto x = random_vector(R * I, 1.0f, 31), W = random_vector(O * I, 0.5f, 32);
  const auto b = random_vector(O, 0.5f, 33), g = random_vector(R * O, 1.0f, 34);
  std::vector<float> out(R * O), dx(R * I, 0.0f), dW(O * I, 0.0f), db(O, 0.0f), ones(R, 1.0f);
  linear_forward(out.data(), x.data(), W.data(), b.data(), R, I, O, Precision::bf16);
  linear_backward_input(dx.data(), g.data(), W.data(), R, I, O, true, Precision::bf16);
  for (int piece = 0; piece < linear_param_pieces(I, O); ++piece)
    linear_backward_params(dW.data(), db.data(), g.data(), x.data(), R, I, O, ones.data(), piece,
                           Precision::bf16);
  auto r = [](const std::vector<float>& v, int i) { return double(as_product_input(v[size_t(i)])); };
  const double tolerance = 1e-5;
  for (int i = 0; i < R; ++i)
    for (int o = 0; o < O; ++o) {
      double sum = b[size_t(o)];
      for (int k = 0; k < I; ++k) sum += r(x, i * I + k) * r(W, o * I + k);
      REQUIRE(out[size_t(i * O + o)] == Approx(sum).margin(tolerance));
    }
  for (int i = 0; i < R; ++i)
    for (int k = 0; k < I; ++k) {
      double sum = 0.0;
      for (int o = 0; o < O; ++o) sum += r(g, i * O + o) * r(W, o * I + k);
      REQUIRE(dx[size_t(i * I + k)] == Approx(sum).margin(tolerance));
    }
  for (int o = 0; o < O; ++o) {
    double bias_sum = 0.0;
    for (int i = 0; i < R; ++i) bias_sum += g[size_t(i * O + o)];
    REQUIRE(db[size_t(o)] == Approx(bias_sum).margin(tolerance));
    for (int k = 0; k < I; ++k) {
      double sum = 0.0;
      for (int i = 0; i < R; ++i) sum += r(g, i * O + o) * r(x, i * I + k);
      REQUIRE(dW[size_t(o * I + k)] == Approx(sum).margin(tolerance));
    }
  }
}

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
  CHECK(any_differs == bf16_products_available());
}

TEST_CASE("bf16 block products leave evaluation passes in fp32", "[model][precision]") {
  const ModelConfig c = fashion_like_config();
  ViT model(c);
  model.init(4);
  const Batch batch(c, 5);
  Activations fp32(c, batch.B, true), bf16(c, batch.B, true);
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
  CHECK(same == !bf16_products_available());
}

TEST_CASE("training with bf16 block products repeats bit for bit on one thread and two",
          "[model][precision][train]") {
  const ModelConfig c = fashion_like_config();
  const Batch batch(c, 16);
  auto run = [&](int threads) {
    const int before = num_threads();
    set_num_threads(threads);
    ViT model(c);
    model.init(11);
    Activations acts(c, batch.B, true);
    acts.block_products = Precision::bf16;
    Optimizer opt(OptimConfig{}, model.num_params);
    for (int step = 0; step < 3; ++step)
      train_step(model, acts, opt, batch.images.data(), batch.targets.data(),
                 batch.labels.data(), batch.B, 1e-3f, 1.0f, rng_key(1, kRngDropout, uint64_t(step)));
    set_num_threads(before);
    return std::vector<float>(model.weights.begin(), model.weights.end());
  };
  CHECK(run(1) == run(2));
}
