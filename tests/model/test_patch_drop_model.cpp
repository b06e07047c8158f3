// Patch dropout in the whole model: the blocks see the kept tokens, the gradients match
// finite differences with either pooling, and evaluation keeps every token.
#include <catch2/catch.hpp>
#include <algorithm>
#include <vector>

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

TEST_CASE("patch dropout: the first block reads the prefix and the kept tokens",
          "[model][patch_drop]") {
  for (PoolKind pool : {PoolKind::cls, PoolKind::mean}) {
    const ModelConfig c = patch_drop_config(pool);
    ViT model(c);
    model.init(4);
    const int B = 5, D = c.dim, N = c.patches(), prefix = c.prefix_tokens();
    Activations acts(c, B, true);
    const auto images = random_vector(B * c.channels * c.image_size * c.image_size, 1.0f, 5);
    vit_forward(model, acts, images.data(), B, true, 555);
    for (int b = 0; b < B; ++b) {
      const float* all = acts.tokens + int64_t(b) * c.tokens() * D;
      const float* x = acts.blocks[0].x + int64_t(b) * c.train_tokens() * D;
      int row = 0;
      for (int t = 0; t < c.tokens(); ++t) {
        const bool kept = t < prefix || acts.patch_keep[b * N + t - prefix];
        if (!kept) continue;
        REQUIRE(std::equal(all + t * D, all + (t + 1) * D, x + row * D));
        ++row;
      }
      REQUIRE(row == c.train_tokens());
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
}

TEST_CASE("evaluation with patch dropout is the model without it", "[model][patch_drop]") {
  ModelConfig with = patch_drop_config(PoolKind::mean), without = with;
  without.patch_drop = 0.0f;
  CHECK(Activations(with, 4, false).tokens == nullptr);  // evaluation keeps no dropped copy
  check_evaluation_ignores_draw(with, without, 555);
}
