// The model's forms: position embedding (learned, a fixed 2-D sine-cosine table, none) and
// pooling (a CLS token, or the mean of the patch tokens). Parameter tables as timm lays them
// out, the sin-cos table against its formula, gradients against finite differences, and a
// fixed table the optimizer never moves.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "model_gradcheck.h"
#include "minivit/formats/config_file.h"
#include "minivit/model/optimizer.h"
#include "minivit/model/train_step.h"
#include "minivit/model/vit.h"

using namespace minivit;
using namespace minivit_test;

namespace {

ModelConfig with_pos_embed(PosEmbedKind pos_embed, PoolKind pool = PoolKind::cls) {
  ModelConfig c = tiny_model_config();
  c.pos_embed = pos_embed;
  c.pool = pool;
  return c;
}

std::vector<std::string> names_of(const ViT& model) {
  std::vector<std::string> names;
  for (const ParamSpec& s : model.specs) names.push_back(s.name);
  return names;
}

std::vector<float> values_of(const ViT& model, const std::vector<float>& buffer, const char* name) {
  const ParamSpec* s = model.find(name);
  REQUIRE(s);
  return std::vector<float>(buffer.begin() + s->offset, buffer.begin() + s->offset + s->size);
}

std::vector<float> weights_of(const ViT& model, const char* name) {
  return values_of(model, std::vector<float>(model.weights.begin(), model.weights.end()), name);
}

// posemb_sincos_2d of SimpleViT written out in double, one element at a time.
double sincos_2d_element(int patch, int d, int G, int D) {
  const int quarter = D / 4, block = d / quarter, k = d % quarter;
  const double omega = 1.0 / std::pow(10000.0, double(k) / double(quarter - 1));
  const double x = patch % G, y = patch / G;
  switch (block) {
    case 0: return std::sin(x * omega);
    case 1: return std::cos(x * omega);
    case 2: return std::sin(y * omega);
    default: return std::cos(y * omega);
  }
}

}  // namespace

TEST_CASE("the position embedding's form decides its tensor and whether it trains",
          "[model][forms]") {
  const ViT learned(with_pos_embed(PosEmbedKind::learned));
  const ViT sincos(with_pos_embed(PosEmbedKind::sincos2d));
  const ViT none(with_pos_embed(PosEmbedKind::none));
  CHECK(names_of(sincos) == names_of(learned));
  for (const ViT* model : {&learned, &sincos}) {
    REQUIRE(model->specs[1].name == "pos_embed");
    CHECK(model->specs[1].shape == std::vector<int64_t>{1, 5, 8});
    CHECK_FALSE(model->specs[1].decay);
  }
  CHECK(learned.find("pos_embed")->trainable);
  CHECK(learned.find("pos_embed")->init == ParamInit::trunc_normal);
  CHECK_FALSE(sincos.find("pos_embed")->trainable);
  CHECK(sincos.find("pos_embed")->init == ParamInit::sincos_2d);
  CHECK(none.find("pos_embed") == nullptr);
  CHECK(none.w.pos_embed == nullptr);
  CHECK(none.specs[1].name == "patch_embed.proj.weight");
  CHECK(none.num_params == learned.num_params - 5 * 8);
  CHECK(sincos.num_params == learned.num_params);
  for (const ViT* model : {&learned, &sincos, &none}) {
    int64_t offset = 0;
    for (const ParamSpec& s : model->specs) {
      CHECK(s.offset == offset);
      offset += s.size;
      if (s.name != "pos_embed") CHECK(s.trainable);
    }
    CHECK(offset == model->num_params);
  }
}

TEST_CASE("sincos2d is SimpleViT's 2-D sine-cosine table, the CLS row zero", "[model][forms]") {
  for (int G : {2, 7}) {
    ModelConfig c = with_pos_embed(PosEmbedKind::sincos2d);
    c.patch_size = 2;
    c.image_size = 2 * G;
    c.dim = 32;
    c.heads = 4;
    ViT model(c);
    model.init(3);
    const std::vector<float> table = weights_of(model, "pos_embed");
    const int D = c.dim, N = G * G;
    REQUIRE(table.size() == size_t((N + 1) * D));
    for (int d = 0; d < D; ++d) CHECK(table[size_t(d)] == 0.0f);
    double worst = 0.0;
    for (int n = 0; n < N; ++n)
      for (int d = 0; d < D; ++d)
        worst = std::max(worst, std::fabs(table[size_t((n + 1) * D + d)] - sincos_2d_element(n, d, G, D)));
    INFO("G " << G << ": largest difference " << worst);
    CHECK(worst <= 6e-8);  // float rounding of values up to 1
    // Patch (y, x) = (1, 0): x gives sin 0 = 0 and cos 0 = 1; y = 1 at the first frequency, 1.
    const float* patch_g = table.data() + (G + 1) * D;
    CHECK(patch_g[0] == 0.0f);
    CHECK(patch_g[D / 4] == 1.0f);
    CHECK(patch_g[D / 2] == Approx(std::sin(1.0)));
    // The same table whatever the seed.
    ViT again(c);
    again.init(4);
    CHECK(weights_of(again, "pos_embed") == table);
  }
}

TEST_CASE("whole-model gradients with the sincos2d table match finite differences",
          "[model][forms][grad]") {
  check_model_gradients(with_pos_embed(PosEmbedKind::sincos2d));
}

TEST_CASE("whole-model gradients without a position embedding match finite differences",
          "[model][forms][grad]") {
  check_model_gradients(with_pos_embed(PosEmbedKind::none));
}

TEST_CASE("training never moves the sincos2d table nor its optimizer moments", "[model][forms]") {
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::sgd}) {
    const ModelConfig c = with_pos_embed(PosEmbedKind::sincos2d);
    ViT model(c);
    model.init(5);
    const std::vector<float> table = weights_of(model, "pos_embed");
    const std::vector<float> before(model.weights.begin(), model.weights.end());
    const int B = 6;
    Activations acts(c, B, ActivationsFor::training);
    auto images = random_vector(B * c.channels * c.image_size * c.image_size, 1.0f, 400);
    const std::vector<int32_t> labels = {0, 1, 2, 0, 1, 2};
    std::vector<float> targets(B * c.num_classes);
    make_targets(targets.data(), labels.data(), B, c.num_classes, 0.1f);
    OptimConfig oc;
    oc.name = kind;
    oc.weight_decay = 0.1f;  // would shrink the table if it applied
    Optimizer opt(oc, model.num_params);
    for (int step = 0; step < 5; ++step)
      train_step(model, acts, opt, images.data(), targets.data(), labels.data(), B, 1e-2f, 1.0f, 0);
    INFO(config_name(kind));
    CHECK(weights_of(model, "pos_embed") == table);
    const std::vector<float> m(opt.m.begin(), opt.m.end()), v(opt.v.begin(), opt.v.end());
    for (float x : values_of(model, m, "pos_embed")) REQUIRE(x == 0.0f);
    for (float x : values_of(model, v, "pos_embed")) REQUIRE(x == 0.0f);
    // Everything else did train.
    CHECK(weights_of(model, "patch_embed.proj.weight") != values_of(model, before, "patch_embed.proj.weight"));
    CHECK(values_of(model, m, "cls_token") != std::vector<float>(8, 0.0f));
  }
}

TEST_CASE("mean pooling drops the CLS token and reads fc_norm, as timm's global_pool='avg'",
          "[model][forms]") {
  const ModelConfig c = with_pos_embed(PosEmbedKind::learned, PoolKind::mean);
  CHECK_FALSE(c.has_cls_token());
  CHECK(c.tokens() == c.patches());
  CHECK(with_pos_embed(PosEmbedKind::learned).tokens() == c.patches() + 1);
  const ViT mean(c);
  const ViT cls(with_pos_embed(PosEmbedKind::learned));
  std::vector<std::string> blocks;
  for (int l = 0; l < 2; ++l)
    for (const char* name : {"norm1.weight", "norm1.bias", "attn.qkv.weight", "attn.qkv.bias",
                             "attn.proj.weight", "attn.proj.bias", "norm2.weight", "norm2.bias",
                             "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias"})
      blocks.push_back("blocks." + std::to_string(l) + "." + name);
  auto table = [&](std::vector<std::string> front, std::vector<std::string> back) {
    front.insert(front.end(), blocks.begin(), blocks.end());
    front.insert(front.end(), back.begin(), back.end());
    return front;
  };
  const std::vector<std::string> patch = {"patch_embed.proj.weight", "patch_embed.proj.bias"};
  CHECK(names_of(cls) == table({"cls_token", "pos_embed", patch[0], patch[1]},
                               {"norm.weight", "norm.bias", "head.weight", "head.bias"}));
  CHECK(names_of(mean) == table({"pos_embed", patch[0], patch[1]},
                                {"fc_norm.weight", "fc_norm.bias", "head.weight", "head.bias"}));
  CHECK(names_of(ViT(with_pos_embed(PosEmbedKind::none, PoolKind::mean))) ==
        table(patch, {"fc_norm.weight", "fc_norm.bias", "head.weight", "head.bias"}));
  CHECK(mean.find("pos_embed")->shape == std::vector<int64_t>{1, 4, 8});
  CHECK(mean.find("fc_norm.weight")->shape == std::vector<int64_t>{8});
  CHECK(mean.find("fc_norm.weight")->init == ParamInit::ones);
  CHECK(mean.find("fc_norm.bias")->init == ParamInit::zeros);
  CHECK(mean.w.cls_token == nullptr);
  CHECK(mean.num_params == cls.num_params - 8 - 8);  // no CLS token, one position fewer
  // The blocks see N tokens instead of N + 1, and so do the FLOP counts.
  CHECK(vit_forward_flops(c) < vit_forward_flops(cls.config));
  CHECK(vit_attention_flop_share(c) < vit_attention_flop_share(cls.config));
}

TEST_CASE("sequence pooling normalises every token with `norm` and adds CCT's attention_pool",
          "[model][forms]") {
  const ModelConfig c = with_pos_embed(PosEmbedKind::learned, PoolKind::seq);
  CHECK_FALSE(c.has_cls_token());
  CHECK(c.tokens() == c.patches());
  const ViT seq(c);
  const ViT mean(with_pos_embed(PosEmbedKind::learned, PoolKind::mean));
  const std::vector<std::string> names = names_of(seq);
  const std::vector<std::string> tail(names.end() - 5, names.end());
  CHECK(tail == std::vector<std::string>{"norm.weight", "norm.bias", "attention_pool.weight",
                                         "head.weight", "head.bias"});
  CHECK(seq.find("attention_pool.weight")->shape == std::vector<int64_t>{1, 8});
  CHECK(seq.find("attention_pool.weight")->decay);
  CHECK(seq.find("attention_pool.weight")->init == ParamInit::trunc_normal);
  CHECK(seq.num_params == mean.num_params + 8);
  CHECK(seq.w.cls_token == nullptr);
}

TEST_CASE("whole-model gradients with sequence pooling match finite differences",
          "[model][forms][grad]") {
  check_model_gradients(with_pos_embed(PosEmbedKind::learned, PoolKind::seq));
  ModelConfig c = with_pos_embed(PosEmbedKind::sincos2d, PoolKind::seq);
  c.dropout = 0.2f;
  check_model_gradients(c);
}

TEST_CASE("with mean pooling the sincos2d table has no CLS row", "[model][forms]") {
  ModelConfig c = with_pos_embed(PosEmbedKind::sincos2d, PoolKind::mean);
  ViT model(c);
  model.init(6);
  const std::vector<float> table = weights_of(model, "pos_embed");
  const int G = c.grid(), D = c.dim;
  REQUIRE(table.size() == size_t(G * G * D));
  for (int n = 0; n < G * G; ++n)
    for (int d = 0; d < D; ++d)
      REQUIRE(table[size_t(n * D + d)] == Approx(sincos_2d_element(n, d, G, D)).margin(1e-7));
}

TEST_CASE("whole-model gradients with mean pooling match finite differences",
          "[model][forms][grad]") {
  check_model_gradients(with_pos_embed(PosEmbedKind::learned, PoolKind::mean));
}

TEST_CASE("whole-model gradients with mean pooling and no position embedding match finite "
          "differences", "[model][forms][grad]") {
  check_model_gradients(with_pos_embed(PosEmbedKind::none, PoolKind::mean));
}

TEST_CASE("whole-model gradients with mean pooling, the sincos2d table and dropout match finite "
          "differences", "[model][forms][grad]") {
  ModelConfig c = with_pos_embed(PosEmbedKind::sincos2d, PoolKind::mean);
  c.dropout = 0.2f;
  c.attention_dropout = 0.1f;
  check_model_gradients(c);
}

TEST_CASE("shifted patches: the projection takes five times the channels, and its gradients "
          "match finite differences", "[model][forms][grad]") {
  ModelConfig c = with_pos_embed(PosEmbedKind::learned, PoolKind::mean);
  c.patch_embed = PatchEmbedKind::shifted;
  ViT model(c);
  const ParamSpec* proj = model.find("patch_embed.proj.weight");
  REQUIRE(proj);
  CHECK(proj->shape == std::vector<int64_t>{c.dim, 5 * c.channels, c.patch_size, c.patch_size});
  CHECK(c.patch_len() == 5 * c.channels * c.patch_size * c.patch_size);
  check_model_gradients(c);
  c.pool = PoolKind::cls;
  check_model_gradients(c);
}

TEST_CASE("a conv stem: stride-2 3x3 convolutions doubling their channels, a 1x1 projection, "
          "and gradients that match finite differences", "[model][forms][grad]") {
  ModelConfig c = with_pos_embed(PosEmbedKind::learned, PoolKind::mean);
  c.patch_embed = PatchEmbedKind::conv;
  c.stem_channels = 3;
  REQUIRE(c.stem_stages() == 2);  // 8 -> 4 -> 2: one position a 4x4 patch
  ViT model(c);
  const ParamSpec* first = model.find("patch_embed.stem.0.weight");
  const ParamSpec* second = model.find("patch_embed.stem.1.weight");
  const ParamSpec* proj = model.find("patch_embed.proj.weight");
  REQUIRE(first);
  REQUIRE(second);
  REQUIRE(proj);
  CHECK(first->shape == std::vector<int64_t>{3, c.channels, 3, 3});
  CHECK(second->shape == std::vector<int64_t>{6, 3, 3, 3});
  CHECK(model.find("patch_embed.stem.1.bias")->shape == std::vector<int64_t>{6});
  CHECK(proj->shape == std::vector<int64_t>{c.dim, 6, 1, 1});
  CHECK(!model.find("patch_embed.stem.2.weight"));
  // The stem comes first in the table, so in timm's state_dict order before the projection.
  CHECK(first->offset < proj->offset);
  check_model_gradients(c);
  c.pool = PoolKind::cls;
  check_model_gradients(c);
  // Three stages for 8-pixel patches on a 16-pixel image, one for 2-pixel patches.
  c.image_size = 16;
  c.patch_size = 8;
  CHECK(c.stem_stages() == 3);
  check_model_gradients(c);
  c.patch_size = 2;
  CHECK(c.stem_stages() == 1);
  check_model_gradients(c);
}

TEST_CASE("activations built for one patch embedding are refused by another",
          "[model][forms][errors]") {
  ModelConfig c = with_pos_embed(PosEmbedKind::learned, PoolKind::mean);
  Activations linear_acts(c, 2, ActivationsFor::training);
  c.patch_embed = PatchEmbedKind::conv;
  ViT model(c);
  model.init(3);
  const auto images = random_vector(2 * c.channels * c.image_size * c.image_size, 1.0f, 4);
  CHECK_THROWS_WITH(vit_forward(model, linear_acts, images.data(), 2, true, 0),
                    Catch::Contains("built for another model"));
  Activations stem_acts(c, 2, ActivationsFor::training);
  c.stem_channels = 5;
  ViT wider(c);
  CHECK_THROWS_WITH(vit_forward(wider, stem_acts, images.data(), 2, true, 0),
                    Catch::Contains("built for another model"));
}

TEST_CASE("activations built for one pooling are refused by the other", "[model][forms][errors]") {
  const ModelConfig mean_config = with_pos_embed(PosEmbedKind::learned, PoolKind::mean);
  ViT model(mean_config);
  model.init(8);
  Activations cls_acts(with_pos_embed(PosEmbedKind::learned), 2,
                       ActivationsFor::evaluation);
  std::vector<float> images(2 * 2 * 8 * 8, 0.5f);
  REQUIRE_THROWS_WITH(vit_forward(model, cls_acts, images.data(), 2, false, 0),
                      Catch::Matchers::Contains("built for another model"));
  Activations mean_acts(mean_config, 2, ActivationsFor::evaluation);
  CHECK_NOTHROW(vit_forward(model, mean_acts, images.data(), 2, false, 0));
}
