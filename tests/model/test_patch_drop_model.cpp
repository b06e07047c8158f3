// Patch dropout in the whole model: the blocks see the kept tokens, the gradients match
// finite differences with either pooling, and evaluation keeps every token.
#include <catch2/catch.hpp>
#include <algorithm>
#include <vector>

#include "minivit/model/train_step.h"
#include "model_gradcheck.h"

using namespace minivit;
using namespace minivit_test;

namespace {

ModelConfig patch_drop_config(PoolKind pool) {
  ModelConfig c = tiny_model_config();  // 4 patches
  c.pool = pool;
  c.patch_drop = 0.5f;                  // 2 kept
  return c;
}

}  // namespace

// Block 0's input after a training forward with patch dropout: the prefix and the kept
// tokens of `every`'s, an inspection forward over every patch of the same images, bit for bit.
static void check_first_block_tokens(const ModelConfig& c, const Activations& training,
                                     const Activations& every, int B) {
  const int D = c.dim, N = c.patches(), prefix = c.prefix_tokens();
  for (int b = 0; b < B; ++b) {
    const float* all = every.blocks[0].x + int64_t(b) * c.tokens() * D;
    const float* x = training.blocks[0].x + int64_t(b) * c.train_tokens() * D;
    int row = 0;
    for (int t = 0; t < c.tokens(); ++t) {
      const bool kept = t < prefix || training.patch_keep[b * N + t - prefix];
      if (!kept) continue;
      REQUIRE(std::equal(all + t * D, all + (t + 1) * D, x + row * D));
      ++row;
    }
    REQUIRE(row == c.train_tokens());
  }
}

TEST_CASE("patch dropout: the first block reads the prefix and the kept tokens",
          "[model][patch_drop]") {
  for (PoolKind pool : {PoolKind::cls, PoolKind::mean}) {
    for (PosEmbedKind pos : {PosEmbedKind::learned, PosEmbedKind::none}) {
      ModelConfig c = patch_drop_config(pool);
      c.pos_embed = pos;
      ViT model(c);
      model.init(4);
      const int B = 5;
      // `every` keeps block 0's input, the embedding's output, for reading after the pass.
      Activations acts(c, B, ActivationsFor::training), every(c, B, ActivationsFor::inspection);
      const auto images = random_vector(B * c.channels * c.image_size * c.image_size, 1.0f, 5);
      vit_forward(model, acts, images.data(), B, true, 555);
      vit_forward(model, every, images.data(), B, false, 555);
      check_first_block_tokens(c, acts, every, B);
    }
  }
}

TEST_CASE("whole-model gradients with patch dropout match finite differences",
          "[model][grad][patch_drop]") {
  SECTION("CLS token") { check_model_gradients(patch_drop_config(PoolKind::cls)); }
  SECTION("mean pooling, with drop path and dropout") {
    ModelConfig c = patch_drop_config(PoolKind::mean);
    c.drop_path = 0.5f;
    c.dropout = 0.2f;
    check_model_gradients(c);
  }
  // Behind a conv stem the last stage and the projection run on the kept patches alone, and
  // their gradients come back to every position through the kept ones; the stages before
  // it, at the positions the kept windows read.
  SECTION("a conv stem of three stages") {
    ModelConfig c = patch_drop_config(PoolKind::mean);
    c.patch_embed = PatchEmbedKind::conv;
    c.stem_channels = 2;
    c.image_size = 16;
    c.patch_size = 8;  // 4 patches, 2 kept
    REQUIRE(c.stem_stages() == 3);
    check_model_gradients(c);
  }
  SECTION("a conv stem of two stages, then of one") {
    ModelConfig c = patch_drop_config(PoolKind::mean);
    c.patch_embed = PatchEmbedKind::conv;
    c.stem_channels = 3;
    REQUIRE(c.stem_stages() == 2);
    check_model_gradients(c);
    c.pool = PoolKind::cls;
    c.patch_size = 2;  // 16 patches, 8 kept, one stage
    REQUIRE(c.stem_stages() == 1);
    check_model_gradients(c);
  }
}

// A stage before the last: at the positions the kept windows read, the outputs of a forward
// over every patch; zero at the others, its GELU slope too, so that they take no gradient.
static void check_hidden_stage(const ModelConfig& c, const Activations& training,
                        const Activations& every, int B, int s) {
  const StemActivations &kept = training.stem[size_t(s)], &all = every.stem[size_t(s)];
  const int positions = c.stem_side(s) * c.stem_side(s), O = c.stem_out(s);
  int read = 0;
  for (int i = 0; i < B * positions; ++i) {
    INFO("stage " << s << " position " << i);
    const float* got = kept.out + int64_t(i) * O;
    const float* slope = kept.pre + int64_t(i) * O;
    if (kept.read[i]) {
      ++read;
      CHECK(std::equal(got, got + O, all.out + int64_t(i) * O));
    } else {
      CHECK(std::all_of(got, got + O, [](float v) { return v == 0.0f; }));
      CHECK(std::all_of(slope, slope + O, [](float v) { return v == 0.0f; }));
    }
  }
  CHECK(read > 0);
  CHECK(read < B * positions);
}

// The stem's outputs and the first block's tokens of a training forward with patch dropout
// against a forward over every patch.
static void check_kept_stem_outputs(const ModelConfig& c) {
  ViT model(c);
  model.init(4);
  const int B = 3, N = c.patches(), PL = c.patch_len();
  const auto images = random_vector(B * c.channels * c.image_size * c.image_size, 1.0f, 6);
  // `every` keeps block 0's input, the embedding's output, for reading after the pass.
  Activations training(c, B, ActivationsFor::training), every(c, B, ActivationsFor::inspection);
  vit_forward(model, training, images.data(), B, true, 555);
  vit_forward(model, every, images.data(), B, false, 555);
  int kept = 0;
  for (int i = 0; i < B * N; ++i) {
    const float* got = training.patches + int64_t(i) * PL;
    if (training.patch_keep[i]) {
      ++kept;
      CHECK(std::equal(got, got + PL, every.patches + int64_t(i) * PL));
    } else {
      CHECK(std::all_of(got, got + PL, [](float v) { return v == 0.0f; }));
    }
  }
  CHECK(kept == B * c.kept_patches());
  check_first_block_tokens(c, training, every, B);
  for (int s = 0; s + 1 < c.stem_stages(); ++s) check_hidden_stage(c, training, every, B, s);
}

TEST_CASE("patch dropout behind a conv stem: the kept patches' stem outputs and tokens are "
          "those of a forward over every patch, the dropped ones' rows zero",
          "[model][patch_drop]") {
  ModelConfig c = patch_drop_config(PoolKind::mean);
  c.patch_embed = PatchEmbedKind::conv;
  c.stem_channels = 3;
  c.image_size = 16;
  c.patch_size = 4;  // 16 patches, 8 kept, behind two stages
  REQUIRE(c.stem_stages() == 2);
  check_kept_stem_outputs(c);
  c.patch_size = 8;  // 4 patches, 2 kept, behind three stages
  REQUIRE(c.stem_stages() == 3);
  check_kept_stem_outputs(c);
}

TEST_CASE("evaluation with patch dropout is the model without it", "[model][patch_drop]") {
  ModelConfig with = patch_drop_config(PoolKind::mean), without = with;
  without.patch_drop = 0.0f;
  // Evaluation keeps no buffers of the kept patches.
  CHECK(Activations(with, 4, ActivationsFor::evaluation).kept_patches == nullptr);
  CHECK(Activations(with, 4, ActivationsFor::evaluation).kept_patch_proj == nullptr);
  check_evaluation_ignores_draw(with, without, 555);
}

TEST_CASE("activations built for patch dropout serve a training step without it (the unmasked "
          "epochs), the same step as on activations built without it; not the reverse",
          "[model][patch_drop]") {
  const ModelConfig with = patch_drop_config(PoolKind::mean);
  ModelConfig without = with;
  without.patch_drop = 0.0f;
  const int B = 3, K = with.num_classes;
  const auto images =
      random_vector(B * with.channels * with.image_size * with.image_size, 1.0f, 8);
  std::vector<float> targets(size_t(B) * K, 0.0f);
  for (int b = 0; b < B; ++b) targets[size_t(b) * K + size_t(b % K)] = 1.0f;
  // Two copies of one model without patch dropout, each stepped on one kind of activations.
  ViT on_dropping_acts(without), on_plain_acts(without);
  on_dropping_acts.init(6);
  on_plain_acts.init(6);
  Activations acts_with(with, B, ActivationsFor::training);
  Activations acts_without(without, B, ActivationsFor::training);
  const float loss_with =
      forward_backward(on_dropping_acts, acts_with, images.data(), targets.data(), B, 9);
  const float loss_without =
      forward_backward(on_plain_acts, acts_without, images.data(), targets.data(), B, 9);
  CHECK(loss_with == loss_without);
  const float* grads = on_dropping_acts.grads.data();
  const int64_t n = on_dropping_acts.num_params;
  CHECK(std::any_of(grads, grads + n, [](float g) { return g != 0.0f; }));
  CHECK(std::equal(grads, grads + n, on_plain_acts.grads.data()));

  ViT dropping(with);
  dropping.init(6);
  CHECK_THROWS_WITH(vit_forward(dropping, acts_without, images.data(), B, true, 9),
                    Catch::Contains("built for another model"));
  // Nor do they serve a model that keeps more patches than they were built for.
  ModelConfig keeps_fewer = with;
  keeps_fewer.patch_drop = 0.75f;  // 1 of 4 kept
  Activations acts_fewer(keeps_fewer, B, ActivationsFor::training);
  CHECK_THROWS_WITH(vit_forward(dropping, acts_fewer, images.data(), B, true, 9),
                    Catch::Contains("built for another model"));
}
