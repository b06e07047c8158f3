// Stochastic depth in the whole model: a dropped image's branch leaves its residual stream
// untouched, the gradients with drop path (alone and beside dropout) match finite
// differences, and evaluation does not drop anything.
#include <catch2/catch.hpp>
#include <algorithm>
#include <vector>

#include "model_gradcheck.h"

using namespace minivit;
using namespace minivit_test;

namespace {

ModelConfig drop_path_config() {
  ModelConfig c = tiny_model_config();
  c.drop_path = 0.5f;  // block 0: 0, block 1: 0.5
  return c;
}

// The draws of the key check_model_gradients uses, so that its differences cover both a
// kept and a dropped image.
constexpr uint64_t kGradcheckKey = 555;

}  // namespace

TEST_CASE("drop path: a dropped image's branch adds nothing to its residual stream",
          "[model][drop_path]") {
  const ModelConfig c = drop_path_config();
  ViT model(c);
  model.init(4);
  const int B = 3;
  Activations acts(c, B, ActivationsFor::training);
  const auto images = random_vector(B * c.channels * c.image_size * c.image_size, 1.0f, 5);
  vit_forward(model, acts, images.data(), B, true, kGradcheckKey);
  const BlockActivations& a = acts.blocks[1];
  const int64_t TD = int64_t(c.tokens()) * c.dim;
  int dropped = 0, kept = 0;
  for (int b = 0; b < B; ++b) {
    for (const float* scale : {a.path_scale_att, a.path_scale_mlp}) {
      REQUIRE((scale[b] == 0.0f || scale[b] == 2.0f));
      (scale[b] == 0.0f ? dropped : kept) += 1;
    }
    // x_mid = x + branch: equal to x where the attention branch was dropped.
    const bool same = std::equal(a.x + b * TD, a.x + (b + 1) * TD, a.resid_mid + b * TD);
    CHECK(same == (a.path_scale_att[b] == 0.0f));
  }
  CHECK(dropped > 0);
  CHECK(kept > 0);
}

TEST_CASE("whole-model gradients with drop path match finite differences",
          "[model][grad][drop_path]") {
  ModelConfig c = drop_path_config();
  SECTION("drop path alone") { check_model_gradients(c); }
  SECTION("with dropout and attention dropout") {
    c.dropout = 0.2f;
    c.attention_dropout = 0.1f;
    check_model_gradients(c);
  }
}

TEST_CASE("evaluation with drop path is the model without it", "[model][drop_path]") {
  ModelConfig with = tiny_model_config(), without = tiny_model_config();
  with.drop_path = 0.5f;
  // This key drops a branch of some image.
  check_evaluation_ignores_draw(with, without, kGradcheckKey);
}
