// The run state: the activation and parameter tables agree with what is allocated, the
// model's doors refuse callers that break their preconditions, and two different models
// trained in turns in one process end exactly as they do apart (nothing is shared between
// them behind their backs).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "gradcheck.h"
#include "model_gradcheck.h"
#include "minivit/core/error.h"
#include "minivit/model/optimizer.h"
#include "minivit/model/train_step.h"
#include "minivit/model/vit.h"
#include "minivit/nn/cross_entropy.h"

using namespace minivit;
using namespace minivit_test;
using Catch::Matchers::Contains;

namespace {

// Another shape in every dimension the layers' scratch depends on: tokens, width, head
// size, depth; and dropout on, so the masks are in use.
ModelConfig other_model() {
  ModelConfig c;
  c.image_size = 12;
  c.channels = 1;
  c.patch_size = 2;
  c.dim = 32;
  c.depth = 1;
  c.heads = 4;
  c.mlp_dim = 24;
  c.num_classes = 5;
  c.dropout = 0.1f;
  c.attention_dropout = 0.2f;
  return c;
}

// One model with its run state and a fixed batch, trained a step at a time.
struct Run {
  static constexpr int kBatch = 5;
  ViT model;
  Activations acts;
  Optimizer optimizer;
  std::vector<float> images, targets;
  std::vector<int32_t> labels;
  int64_t step = 0;

  explicit Run(const ModelConfig& c, uint64_t seed)
      : model(c),
        acts(c, kBatch, ActivationsFor::training),
        optimizer(OptimConfig{}, model.num_params),
        images(random_vector(kBatch * c.channels * c.image_size * c.image_size, 1.0f, seed)),
        targets(size_t(kBatch * c.num_classes)),
        labels(kBatch) {
    model.init(seed);
    for (int b = 0; b < kBatch; ++b) labels[size_t(b)] = b % c.num_classes;
    make_targets(targets.data(), labels.data(), kBatch, c.num_classes, 0.1f);
  }
  void train_one_step() {
    train_step(model, acts, optimizer, images.data(), targets.data(), labels.data(), kBatch, 1e-3f,
               1.0f, rng_key(7, kRngDropout, uint64_t(step++)));
  }
  std::vector<float> weights() const { return {model.weights.begin(), model.weights.end()}; }
};

}  // namespace

TEST_CASE("two different models trained in turns end as they do apart", "[model][state]") {
  const int steps = 4;
  std::vector<float> alone_a, alone_b;
  {
    Run a(tiny_model_config(), 1);
    for (int s = 0; s < steps; ++s) a.train_one_step();
    alone_a = a.weights();
  }
  {
    Run b(other_model(), 2);
    for (int s = 0; s < steps; ++s) b.train_one_step();
    alone_b = b.weights();
  }
  Run a(tiny_model_config(), 1), b(other_model(), 2);
  for (int s = 0; s < steps; ++s) {
    a.train_one_step();
    b.train_one_step();
  }
  CHECK(a.weights() == alone_a);
  CHECK(b.weights() == alone_b);
}

TEST_CASE("the activations hold exactly what the table describes", "[model][state]") {
  using enum ActivationsFor;
  for (const ModelConfig& c : {tiny_model_config(), other_model()})
    for (ActivationsFor use : {evaluation, inspection, training, explanation}) {
      const int B = 7;
      const bool training = use == ActivationsFor::training || use == explanation;
      const bool shared = use == evaluation;
      Activations acts(c, B, use);
      INFO("dim " << c.dim << ", use " << int(use));
      CHECK(double(acts.bytes()) == activation_bytes(c, B, use));
      CHECK(activation_bytes(c, 2 * B, use) > activation_bytes(c, B, use));
      // The attention weights of every block, or of the one set the blocks share: B*H*T*T
      // floats each, on whole cache lines.
      const auto buffers = activation_buffers(c, B, use);
      auto buffer = [&](const char* name) {
        return std::find_if(buffers.begin(), buffers.end(),
                            [&](const ActivationBuffer& b) { return b.name == name; });
      };
      REQUIRE(buffer("att") != buffers.end());
      const double att_bytes = 4.0 * B * c.heads * c.tokens() * c.tokens();
      CHECK(buffer("att")->bytes == (shared ? 1 : c.depth) * std::ceil(att_bytes / 64) * 64);
      // Each block's weight transposes are its own, shared activations or not.
      const double qkv_w_bytes = 4.0 * c.dim * 3 * c.dim;
      CHECK(buffer("qkv_w_t")->bytes == c.depth * std::ceil(qkv_w_bytes / 64) * 64);
      CHECK((buffer("dlogits") != buffers.end()) == training);
      CHECK((buffer("att_grad") != buffers.end()) == (use == explanation));
      CHECK(vit_memory_bytes(c, B, use) ==
            4.0 * vit_param_count(c) * (use == ActivationsFor::training ? 4 : 2) +
                activation_bytes(c, B, use));
      // Training-only buffers exist only for training; masks only with their dropout.
      CHECK((acts.dlogits != nullptr) == training);
      CHECK((acts.blocks[0].att_mask != nullptr) == (training && c.attention_dropout > 0));
      CHECK((acts.blocks[0].proj_mask != nullptr) == (training && c.dropout > 0));
      REQUIRE(acts.blocks.size() == size_t(c.depth));
      CHECK(acts.blocks_share() == shared);
      if (c.depth < 2) continue;
      const BlockActivations &first = acts.blocks.front(), &last = acts.blocks.back();
      CHECK((first.qkv == last.qkv) == shared);
      CHECK((first.att == last.att) == shared);
      CHECK((first.x == last.x) == shared);
      CHECK(first.qkv_w_t != last.qkv_w_t);
      CHECK(first.fc2_w_t != last.fc2_w_t);
    }
}

TEST_CASE("the parameter table is the model's layout and initialisation", "[model][state]") {
  ModelConfig c = tiny_model_config();
  SECTION("patches") {}
  SECTION("a conv stem") { c.patch_embed = PatchEmbedKind::conv; }
  ViT model(c);
  model.init(5);
  CHECK(vit_param_count(c) == double(model.num_params));
  int64_t next = 0;
  for (const ParamSpec& s : model.specs) {
    INFO(s.name);
    CHECK(s.offset == next);  // contiguous, in table order
    next += s.size;
    const float* w = model.weights.data() + s.offset;
    // Every field of ViTParams points at its own row of the table.
    const float* bound = s.block >= 0   ? model.w.blocks[size_t(s.block)].*s.block_field
                         : s.stage >= 0 ? model.w.stem[size_t(s.stage)].*s.stage_field
                                        : model.w.*s.model_field;
    CHECK(bound == w);
    switch (s.init) {
      case ParamInit::zeros:
        CHECK(*std::max_element(w, w + s.size) == 0.0f);
        break;
      case ParamInit::ones:
        CHECK(*std::min_element(w, w + s.size) == 1.0f);
        break;
      case ParamInit::trunc_normal:
        for (int64_t i = 0; i < s.size; ++i) REQUIRE(std::abs(w[i]) <= 2 * s.init_scale);
        break;
      case ParamInit::constant:
        CHECK(*std::min_element(w, w + s.size) == float(s.init_scale));
        CHECK(*std::max_element(w, w + s.size) == float(s.init_scale));
        break;
      case ParamInit::normal:
      case ParamInit::uniform:
        for (int64_t i = 0; i < s.size; ++i) REQUIRE(std::abs(w[i]) <= 6 * s.init_scale);
        break;
      case ParamInit::sincos_2d:
        for (int64_t i = 0; i < s.size; ++i) REQUIRE(std::abs(w[i]) <= 1.0f);
        break;
    }
  }
  CHECK(next == model.num_params);
}

TEST_CASE("vit_forward and vit_backward refuse callers that break their preconditions",
          "[model][state][errors]") {
  const ModelConfig c = tiny_model_config();
  ViT model(c);
  model.init(1);
  const int B = 4;
  const auto images = random_vector(2 * B * c.channels * c.image_size * c.image_size, 1.0f, 3);
  Activations train_acts(c, B, ActivationsFor::training);
  Activations eval_acts(c, B, ActivationsFor::evaluation);

  CHECK_THROWS_WITH(vit_forward(model, train_acts, images.data(), B + 1, true, 0),
                    Contains("batch 5 is outside 1..4"));
  CHECK_THROWS_WITH(vit_forward(model, train_acts, images.data(), 0, true, 0),
                    Contains("batch 0 is outside 1..4"));
  CHECK_THROWS_WITH(vit_forward(model, eval_acts, images.data(), B, true, 0),
                    Contains("needs activations built for training"));
  CHECK_THROWS_WITH(vit_forward(model, train_acts, nullptr, B, false, 0), Contains("no images"));
  ModelConfig wider = c;
  wider.dim = 16;
  Activations wrong_shape(wider, B, ActivationsFor::training);
  CHECK_THROWS_WITH(vit_forward(model, wrong_shape, images.data(), B, false, 0),
                    Contains("built for another model"));
  CHECK_THROWS_WITH(hold_forward_weights(model, wrong_shape), Contains("built for another model"));
  CHECK(wrong_shape.forward_weights_held == nullptr);
  ModelConfig with_dropout = c;
  with_dropout.dropout = 0.1f;
  ViT dropout_model(with_dropout);
  CHECK_THROWS_WITH(vit_forward(dropout_model, train_acts, images.data(), B, true, 0),
                    Contains("built for another model"));

  CHECK_THROWS_WITH(vit_backward(model, train_acts, B), Contains("the last forward was none"));
  CHECK_THROWS_WITH(vit_backward(model, eval_acts, B), Contains("built for evaluation"));
  vit_forward(model, train_acts, images.data(), 2, false, 0);
  CHECK_THROWS_WITH(vit_backward(model, train_acts, B),
                    Contains("the last forward was an evaluation one of batch 2"));
  vit_forward(model, train_acts, images.data(), 2, true, 0);
  CHECK_THROWS_WITH(vit_backward(model, train_acts, B),
                    Contains("the last forward was a training one of batch 2"));
  vit_forward(model, train_acts, images.data(), B, true, 0);
  CHECK_NOTHROW(vit_backward(model, train_acts, B));
}

TEST_CASE("a model and its run state refuse impossible shapes", "[model][state][errors]") {
  ModelConfig c = tiny_model_config();
  c.heads = 3;
  CHECK_THROWS_WITH(ViT(c), Contains("dim 8 is not divisible by heads 3"));
  c = tiny_model_config();
  c.patch_size = 3;
  CHECK_THROWS_WITH(ViT(c), Contains("image_size 8 is not divisible by patch_size 3"));
  c = tiny_model_config();
  c.depth = 0;
  CHECK_THROWS_AS(ViT(c), Error);
  CHECK_THROWS_WITH(Activations(tiny_model_config(), 0, ActivationsFor::training),
                    Contains("at least 1"));
  ViT model(tiny_model_config());
  Optimizer wrong(OptimConfig{}, model.num_params + 1);
  CHECK_THROWS_WITH(wrong.step(model, 1e-3f), Contains("optimizer"));
}

TEST_CASE("held forward weights are read as they were made until released; a training "
          "forward makes them anew", "[model][state]") {
  ModelConfig c = tiny_model_config();
  SECTION("patches") {}
  SECTION("a conv stem") {
    c.patch_embed = PatchEmbedKind::conv;
    c.stem_channels = 3;
  }
  Run run(c, 11);
  const int B = Run::kBatch, K = c.num_classes;
  auto logits = [&](Activations& acts, bool training) {
    vit_forward(run.model, acts, run.images.data(), B, training, rng_key(3, kRngDropout, 0));
    return std::vector<float>(acts.logits, acts.logits + B * K);
  };
  Activations eval(c, B, ActivationsFor::evaluation), fresh(c, B, ActivationsFor::evaluation);
  const std::vector<float> before = logits(eval, false);
  std::vector<float> moved;
  {
    const ForwardWeightsHeld held(run.model, eval);
    CHECK(eval.forward_weights_held == run.model.weights.data());
    CHECK(logits(eval, false) == before);
    // The weights move under the held copy: its matrices stay as they were made (the
    // contract is to hold only what does not move; this shows that nothing remakes them).
    run.train_one_step();
    moved = logits(fresh, false);
    CHECK(moved != before);
    CHECK(logits(eval, false) != moved);
  }
  CHECK(eval.forward_weights_held == nullptr);
  CHECK(logits(eval, false) == moved);

  // A training forward never reads a held copy: it makes its own from the weights as they are.
  Activations trained(c, B, ActivationsFor::training);
  Activations fresh_trained(c, B, ActivationsFor::training);
  hold_forward_weights(run.model, trained);
  run.train_one_step();
  CHECK(logits(trained, true) == logits(fresh_trained, true));
  release_forward_weights(trained);
}

TEST_CASE("the forward weights are the model's linear weights transposed at every level of "
          "minivit's kernels, and not made under OpenBLAS's",
          "[model][state]") {
  // Whole 16 x 16 tiles and edges in both directions: the stem's 27 and 54 inputs, a width
  // of 32 (qkv 96 x 32) and an MLP of 24.
  ModelConfig c = other_model();
  c.image_size = 16;
  c.channels = 3;
  c.patch_size = 4;
  c.patch_embed = PatchEmbedKind::conv;
  c.stem_channels = 6;
  ViT model(c);
  model.init(5);
  const int D = c.dim, M = c.mlp_dim;
  auto transposed = [](const float* w, int rows, int cols) {
    std::vector<float> t(size_t(rows) * cols);
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < cols; ++k) t[size_t(k) * rows + r] = w[size_t(r) * cols + k];
    return t;
  };
  auto equals = [](const float* made, const std::vector<float>& expected) {
    return std::equal(expected.begin(), expected.end(), made);
  };
  // Every forward weight with its (O, I) source, for one block.
  auto each_forward_weight = [&](Activations& acts, auto&& visit) {
    visit(acts.patch_w_t, model.w.patch_w, D, c.patch_len());
    for (int s = 0; s < c.stem_stages(); ++s)
      visit(acts.stem[size_t(s)].weight_t, model.w.stem[size_t(s)].weight, c.stem_out(s),
            9 * c.stem_in(s));
    const BlockParams& bw = model.w.blocks[0];
    BlockActivations& a = acts.blocks[0];
    visit(a.qkv_w_t, bw.qkv_w, 3 * D, D);
    visit(a.proj_w_t, bw.proj_w, D, D);
    visit(a.fc1_w_t, bw.fc1_w, M, D);
    visit(a.fc2_w_t, bw.fc2_w, D, M);
  };
  static constexpr float kUntouched = -7.0f;
  for (GemmKernels kernels : {GemmKernels::openblas, GemmKernels::avx2, GemmKernels::avx512}) {
    std::optional<Compute> compute = Compute::with_kernels(kernels);
    if (!compute) continue;  // the CPU lacks the level
    if (kernels == GemmKernels::openblas) compute->isa = Isa::x86_64;  // the baseline's layers
    INFO("kernels " << compute->kernels_name());
    Activations acts(c, 2, ActivationsFor::training);
    acts.compute = *compute;
    each_forward_weight(acts, [](float* made, const float*, int rows, int cols) {
      std::fill(made, made + int64_t(rows) * cols, kUntouched);
    });
    make_forward_weights(model, acts);
    const bool openblas = kernels == GemmKernels::openblas;
    CHECK(acts.reads_weight_transposes() == !openblas);
    each_forward_weight(acts, [&](float* made, const float* weight, int rows, int cols) {
      if (openblas)
        CHECK(std::all_of(made, made + int64_t(rows) * cols,
                          [](float v) { return v == kUntouched; }));
      else
        CHECK(equals(made, transposed(weight, rows, cols)));
    });
  }
}
