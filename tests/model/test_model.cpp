// The whole ViT: every parameter's gradient against finite differences on a tiny config,
// parameter layout as timm names it, and a tiny model that must overfit one batch.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "model_gradcheck.h"
#include "minivit/kernels/compute.h"
#include "minivit/model/optimizer.h"
#include "minivit/model/train_step.h"
#include "minivit/model/vit.h"
#include "minivit/nn/cross_entropy.h"

using namespace minivit;
using namespace minivit_test;

TEST_CASE("parameter table follows timm's names, shapes and order", "[model]") {
  ModelConfig c = tiny_model_config();
  ViT model(c);
  REQUIRE(model.specs.size() == 4 + 12 * 2 + 4);
  CHECK(model.specs[0].name == "cls_token");
  CHECK(model.specs[1].name == "pos_embed");
  CHECK(model.specs[1].shape == std::vector<int64_t>{1, 5, 8});
  CHECK(model.specs[2].name == "patch_embed.proj.weight");
  CHECK(model.specs[2].shape == std::vector<int64_t>{8, 2, 4, 4});
  CHECK(model.find("blocks.1.attn.qkv.weight")->shape == std::vector<int64_t>{24, 8});
  CHECK(model.find("blocks.0.mlp.fc2.weight")->shape == std::vector<int64_t>{8, 16});
  CHECK(model.find("head.weight")->shape == std::vector<int64_t>{3, 8});
  CHECK(model.specs.back().name == "head.bias");
  // Weight decay only on matrices.
  CHECK(model.find("blocks.0.attn.qkv.weight")->decay);
  CHECK_FALSE(model.find("blocks.0.attn.qkv.bias")->decay);
  CHECK_FALSE(model.find("blocks.0.norm1.weight")->decay);
  CHECK_FALSE(model.find("pos_embed")->decay);
  CHECK_FALSE(model.find("cls_token")->decay);
  int64_t total = 0;
  for (const auto& s : model.specs) {
    CHECK(s.offset == total);
    total += s.size;
  }
  CHECK(total == model.num_params);
}

TEST_CASE("default Fashion-MNIST model has the expected size", "[model]") {
  ModelConfig c;  // defaults: 28px, patch 4, dim 64, depth 6, heads 4, mlp 128, 10 classes
  ViT model(c);
  const int64_t D = 64, M = 128, T = 50;
  const int64_t block = 4 * D + 3 * D * D + 3 * D + D * D + D + M * D + M + D * M + D;
  CHECK(model.num_params == D + T * D + D * 16 + D + 6 * block + 2 * D + 10 * D + 10);
  CHECK(vit_forward_flops(c) == Approx(23.6e6).epsilon(0.01));
}

TEST_CASE("initialisation follows timm", "[model]") {
  ViT model(tiny_model_config());
  model.init(7);
  auto values = [&](const char* name) {
    const ParamSpec* s = model.find(name);
    return std::vector<float>(model.weights.data() + s->offset, model.weights.data() + s->offset + s->size);
  };
  for (float v : values("blocks.0.norm1.weight")) CHECK(v == 1.0f);
  for (float v : values("blocks.0.attn.qkv.bias")) CHECK(v == 0.0f);
  for (float v : values("blocks.1.mlp.fc1.weight")) CHECK(std::fabs(v) <= 0.04f);
  for (float v : values("cls_token")) CHECK(std::fabs(v) < 1e-5f);
  const double bound = 1.0 / std::sqrt(2.0 * 4 * 4);
  for (float v : values("patch_embed.proj.weight")) CHECK(std::fabs(v) <= bound);
  // Same seed, same weights; another seed, other weights.
  ViT again(tiny_model_config()), other(tiny_model_config());
  again.init(7);
  other.init(8);
  CHECK(std::memcmp(again.weights.data(), model.weights.data(), sizeof(float) * model.num_params) == 0);
  CHECK(std::memcmp(other.weights.data(), model.weights.data(), sizeof(float) * model.num_params) != 0);
}

static void check_gradients_with_dropout(float dropout, float attention_dropout) {
  ModelConfig c = tiny_model_config();
  c.dropout = dropout;
  c.attention_dropout = attention_dropout;
  check_model_gradients(c);
}

TEST_CASE("whole-model gradients match finite differences", "[model][grad]") {
  check_gradients_with_dropout(0.0f, 0.0f);
}

TEST_CASE("whole-model gradients with dropout match finite differences", "[model][grad]") {
  check_gradients_with_dropout(0.2f, 0.0f);
}

TEST_CASE("whole-model gradients with attention dropout match finite differences", "[model][grad]") {
  check_gradients_with_dropout(0.0f, 0.2f);
}

TEST_CASE("whole-model gradients with both dropouts match finite differences", "[model][grad]") {
  check_gradients_with_dropout(0.2f, 0.1f);
}

TEST_CASE("whole-model gradients match finite differences for every attention form",
          "[model][grad][forms]") {
  ModelConfig c = tiny_model_config();
  c.attention_dropout = 0.1f;
  SECTION("dot") {
    c.attention = AttentionForm::dot;
    check_model_gradients(c);
  }
  SECTION("additive") {
    c.attention = AttentionForm::additive;
    check_model_gradients(c);
  }
  SECTION("cosine, without a CLS token or positions") {
    c.attention = AttentionForm::cosine;
    c.pool = PoolKind::mean;
    c.pos_embed = PosEmbedKind::none;
    check_model_gradients(c, 1e-2);
  }
  SECTION("lsa, with sequence pooling") {
    c.attention = AttentionForm::lsa;
    c.pool = PoolKind::seq;
    check_model_gradients(c);
  }
}

TEST_CASE("the attention forms' own tensors: names, shapes, init, no weight decay",
          "[model][forms]") {
  ModelConfig c = tiny_model_config();
  c.attention = AttentionForm::additive;
  ViT additive(c);
  additive.init(1);
  const ParamSpec* v = additive.find("blocks.1.attn.additive_v");
  REQUIRE(v);
  CHECK(v->shape == std::vector<int64_t>{2, 4});
  CHECK_FALSE(v->decay);
  CHECK(additive.find("blocks.0.attn.logit_scale") == nullptr);
  // After timm's qkv, before its proj, as the reference implementation orders them.
  CHECK(additive.find("blocks.1.attn.qkv.bias")->offset + 3 * 8 == v->offset);
  CHECK(additive.w.blocks[1].additive_v == additive.weights.data() + v->offset);
  c.attention = AttentionForm::cosine;
  ViT cosine(c);
  cosine.init(1);
  const ParamSpec* scale = cosine.find("blocks.0.attn.logit_scale");
  REQUIRE(scale);
  CHECK(scale->shape == std::vector<int64_t>{2, 1, 1});
  CHECK_FALSE(scale->decay);
  for (int h = 0; h < 2; ++h) CHECK(cosine.w.blocks[0].logit_scale[h] == float(std::log(10.0)));
  CHECK(cosine.find("blocks.0.attn.additive_v") == nullptr);
  c.attention = AttentionForm::lsa;  // the same tensor, from the scaled dot product's 1 / sqrt(Dh)
  ViT lsa(c);
  lsa.init(1);
  REQUIRE(lsa.find("blocks.1.attn.logit_scale"));
  CHECK(lsa.find("blocks.1.attn.logit_scale")->shape == std::vector<int64_t>{2, 1, 1});
  for (int h = 0; h < 2; ++h)
    CHECK(lsa.w.blocks[1].logit_scale[h] == float(-0.5 * std::log(4.0)));
  c.attention = AttentionForm::dot;
  ViT dot(c);
  CHECK(dot.num_params == ViT(tiny_model_config()).num_params);
}

TEST_CASE("a tiny model overfits one small batch", "[model][train]") {
  ModelConfig c = tiny_model_config();
  ViT model(c);
  model.init(3);
  const int B = 12;
  Activations acts(c, B, ActivationsFor::training);
  auto images = random_vector(B * c.channels * c.image_size * c.image_size, 1.0f, 200);
  std::vector<int32_t> labels(B);
  for (int b = 0; b < B; ++b) labels[b] = b % c.num_classes;
  std::vector<float> targets(B * c.num_classes);
  make_targets(targets.data(), labels.data(), B, c.num_classes, 0.0f);
  OptimConfig oc;
  oc.lr = 1e-2f;
  oc.weight_decay = 0.0f;
  Optimizer opt(oc, model.num_params);
  StepResult first, last;
  for (int step = 0; step < 300; ++step) {
    last = train_step(model, acts, opt, images.data(), targets.data(), labels.data(), B, oc.lr, 1.0f, 0);
    if (step == 0) first = last;
  }
  INFO("loss " << first.loss << " -> " << last.loss);
  CHECK(first.loss > 0.9f);
  CHECK(last.loss < 0.05f);
  CHECK(last.correct == B);
}

TEST_CASE("training is deterministic for a seed and thread count", "[model][train]") {
  ModelConfig c = tiny_model_config();
  c.dropout = 0.1f;
  c.attention_dropout = 0.1f;
  c.drop_path = 0.2f;
  auto run = [&] {
    ViT model(c);
    model.init(11);
    const int B = 6;
    Activations acts(c, B, ActivationsFor::training);
    auto images = random_vector(B * c.channels * c.image_size * c.image_size, 1.0f, 300);
    std::vector<int32_t> labels = {0, 1, 2, 0, 1, 2};
    std::vector<float> targets(B * c.num_classes);
    make_targets(targets.data(), labels.data(), B, c.num_classes, 0.1f);
    Optimizer opt(OptimConfig{}, model.num_params);
    for (int step = 0; step < 5; ++step)
      train_step(model, acts, opt, images.data(), targets.data(), labels.data(), B, 1e-3f, 1.0f,
                 rng_key(1, kRngDropout, uint64_t(step)));
    return std::vector<float>(model.weights.begin(), model.weights.end());
  };
  CHECK(run() == run());
}

// The forward takes a batch in chunks of images, across the threads when there are enough
// (vit_passes.h); no image's result may depend on its neighbours or on the cut.
TEST_CASE("each image's logits in a batch of 20 are those it gets alone", "[model]") {
  ModelConfig c = tiny_model_config();
  c.image_size = 28;
  c.channels = 1;
  c.patch_size = 4;  // 50 tokens
  c.dim = 64;
  c.heads = 4;
  c.mlp_dim = 128;
  ViT model(c);
  model.init(5);
  const int B = 20;
  const int64_t image_len = int64_t(c.image_size) * c.image_size;
  auto images = random_vector(size_t(B * image_len), 1.0f, 77);
  Activations batch(c, B, ActivationsFor::evaluation);
  vit_forward(model, batch, images.data(), B, false, 0);
  Activations alone(c, 1, ActivationsFor::evaluation);
  for (int b = 0; b < B; ++b) {
    vit_forward(model, alone, images.data() + b * image_len, 1, false, 0);
    for (int k = 0; k < c.num_classes; ++k)
      CHECK(batch.logits[b * c.num_classes + k] ==
            Approx(alone.logits[k]).epsilon(1e-5).margin(1e-6));
  }
}

// A batch of one chunk (8 images or fewer) splits its layers across the threads in
// evaluation (vit_forward.cpp's forward_split): rows to each LayerNorm and product, (image,
// head) pairs to the attention core. What the pass leaves must be one thread's, bit for
// bit, at each level whose kernels this CPU runs, in every attention form and pooling.
TEST_CASE("a few images' evaluation forward on two threads gives one thread's bits",
          "[model]") {
  ModelConfig base = tiny_model_config();
  base.image_size = 28;
  base.channels = 1;
  base.patch_size = 4;  // 49 patches: at least 16 rows a thread on two
  base.dim = 64;
  base.heads = 4;
  base.mlp_dim = 128;
  base.num_classes = 10;
  std::vector<ModelConfig> forms(4, base);
  forms[1].pool = PoolKind::mean;
  forms[1].attention = AttentionForm::additive;
  forms[2].pool = PoolKind::seq;
  forms[2].attention = AttentionForm::lsa;
  forms[2].pos_embed = PosEmbedKind::sincos2d;
  forms[3].patch_embed = PatchEmbedKind::conv;
  forms[3].stem_channels = 16;
  forms[3].attention = AttentionForm::cosine;
  for (GemmKernels kernels : {GemmKernels::avx512, GemmKernels::avx2}) {
    const std::optional<Compute> compute = Compute::with_kernels(kernels);
    if (!compute) continue;
    for (size_t f = 0; f < forms.size(); ++f) {
      const ModelConfig& c = forms[f];
      ViT model(c);
      model.init(9);
      for (int B : {1, 3, 8}) {
        INFO("kernels " << compute->kernels_name() << ", form " << f << ", batch " << B);
        const int64_t image_len = int64_t(c.image_size) * c.image_size;
        const auto images = random_vector(size_t(B * image_len), 1.0f, 31);
        auto forward = [&](int threads) {
          Activations acts(c, B, ActivationsFor::evaluation);
          acts.compute = *compute;
          acts.compute.threads = threads;
          vit_forward(model, acts, images.data(), B, false, 0);
          const int T = c.tokens(), D = c.dim;
          std::vector<float> left(acts.logits, acts.logits + B * c.num_classes);
          left.insert(left.end(), acts.x_final, acts.x_final + int64_t(B) * T * D);
          // The last block's attention, in the buffers the blocks share in evaluation.
          const float* att = acts.blocks[0].att;
          left.insert(left.end(), att, att + int64_t(B) * c.heads * T * T);
          return left;
        };
        const std::vector<float> one = forward(1), two = forward(2);
        CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
      }
    }
  }
}
