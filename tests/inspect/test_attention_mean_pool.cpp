// Attention inspection of a model without a CLS token (model.pool = mean): the maps are
// N x N, "where the model looks" is the mean of all token rows, rollout reads that mean row,
// discard may take any entry, and the summary and page say so.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <vector>

#include "minivit/inspect/attention_maps.h"
#include "minivit/model/vit.h"
#include "small_model.h"

using namespace minivit;
using namespace minivit_test;
using Catch::Matchers::Contains;

namespace {

ModelConfig mean_pool_config() { return small_attention_config(PoolKind::mean); }

Image8 grey_image(int S) {
  Image8 img = Image8::from_shape({1, size_t(S), size_t(S)});
  for (size_t i = 0; i < img.size(); ++i) img.data()[i] = uint8_t(i * 37 % 256);
  return img;
}

// A model whose every row in every layer and head looks at patch `chosen` alone (as in the
// CLS test of test_attention_maps.cpp, without the CLS token): only that patch's position
// embedding is non-zero, every key reads it, every query is the constant bias, and the
// blocks add nothing to the residual stream.
void look_at_one_patch(ViT& model, int chosen) {
  const ModelConfig& c = model.config;
  const int D = c.dim, Dh = c.head_dim(), N = c.patches();
  auto zero = [](float* p, int64_t n) { std::fill(p, p + n, 0.f); };
  zero(model.w.patch_w, int64_t(D) * c.patch_len());
  zero(model.w.patch_b, D);
  zero(model.w.pos_embed, int64_t(N) * D);
  for (int d = 0; d < D; ++d) model.w.pos_embed[chosen * D + d] = d % 2 ? -1.f : 1.f;
  for (auto& b : model.w.blocks) {
    zero(b.qkv_w, 3 * int64_t(D) * D);
    zero(b.qkv_b, 3 * D);
    for (int h = 0; h < c.heads; ++h) {
      b.qkv_b[h * Dh] = 1.f;
      for (int d = 0; d < D; ++d) b.qkv_w[(D + h * Dh) * D + d] = 5.f * (d % 2 ? -1.f : 1.f);
    }
    zero(b.proj_w, int64_t(D) * D), zero(b.proj_b, D);
    zero(b.fc2_w, int64_t(D) * c.mlp_dim), zero(b.fc2_b, D);
  }
}

}  // namespace

TEST_CASE("without a CLS token the maps are N x N and every row sums to 1", "[attention][forms]") {
  const ModelConfig c = mean_pool_config();
  ViT model(c);
  model.init(12);
  const AttentionMaps m = collect_attention(model, sine_image(c).data());
  CHECK(m.pool == PoolKind::mean);
  const size_t N = size_t(c.patches());
  REQUIRE(std::vector<size_t>(m.att.shape().begin(), m.att.shape().end()) ==
          std::vector<size_t>{2, 2, N, N});
  for (size_t row = 0; row < m.att.size() / N; ++row) {
    double sum = 0.0;
    for (size_t j = 0; j < N; ++j) sum += m.att.data()[row * N + j];
    REQUIRE(sum == Approx(1.0).margin(1e-5));
  }
  // Where the model looks: the mean of all rows, a distribution over the patches.
  const std::vector<float> readout = readout_attention(m.att, m.pool, 1, 0);
  REQUIRE(readout.size() == N);
  for (size_t j = 0; j < N; ++j) {
    double column = 0.0;
    for (size_t i = 0; i < N; ++i) column += m.att(1, 0, i, j);
    CHECK(readout[j] == Approx(column / double(N)).margin(1e-6));
  }
  CHECK(std::string(readout_name(PoolKind::mean)) == "the mean of all tokens");
}

TEST_CASE("without a CLS token discard may zero any entry", "[attention][rollout][forms]") {
  const size_t T = 4;
  Tensor2 a = Tensor2::from_shape({T, T});
  for (size_t i = 0; i < T * T; ++i) a.data()[i] = float((i * 7) % 16 + 1);  // 1..16 scrambled
  Tensor2 d = a;
  discard_lowest(d, PoolKind::mean, 0.5);  // floor(0.5 * 16) = 8 of all 16 entries
  for (size_t i = 0; i < T * T; ++i) CHECK(d.data()[i] == (a.data()[i] <= 8 ? 0.f : a.data()[i]));
  CHECK(d(0, 0) == 0.f);  // 1, in column 0: fair game without a CLS token
}

TEST_CASE("without a CLS token the rollout is the mean of the rollout matrix's rows",
          "[attention][rollout][forms]") {
  const ModelConfig c = mean_pool_config();
  ViT model(c);
  model.init(13);
  for (auto& b : model.w.blocks)
    for (int i = 0; i < 2 * c.dim * c.dim; ++i) b.qkv_w[i] *= 20.f;
  const AttentionMaps m = collect_attention(model, sine_image(c).data());
  const size_t N = size_t(c.patches()), G = size_t(c.grid());
  for (const double discard : {0.0, 0.4}) {
    INFO("discard " << discard);
    const Tensor2 joint = rollout_matrix(m.att, m.pool, Fusion::mean, discard);
    const Tensor2 r = attention_rollout(m.att, m.pool, Fusion::mean, discard);
    REQUIRE(r.shape(0) == G);
    REQUIRE(r.shape(1) == G);
    double total = 0.0;
    for (size_t j = 0; j < N; ++j) {
      double column = 0.0;
      for (size_t i = 0; i < N; ++i) column += joint(i, j);
      CHECK(r.data()[j] == Approx(column / double(N)).margin(1e-6));
      total += r.data()[j];
    }
    CHECK(total == Approx(1.0).margin(1e-5));
  }
  // Maps of the other form are refused by their token count.
  CHECK_THROWS_WITH(attention_rollout(m.att, PoolKind::cls, Fusion::mean, 0.0),
                    Contains("9 tokens, expected 1 + a square number of patches"));
}

TEST_CASE("a mean-pooled model set to look at one patch: maps, rollout and picture agree",
          "[attention][forms]") {
  const ModelConfig c = mean_pool_config();
  const int N = c.patches(), G = c.grid();
  for (const int chosen : {0, 5}) {
    INFO("chosen patch " << chosen);
    ViT model(c);
    model.init(2);
    look_at_one_patch(model, chosen);
    const AttentionMaps m = collect_attention(model, sine_image(c).data());
    for (int l = 0; l < c.depth; ++l)
      for (int h = 0; h < c.heads; ++h) {
        const std::vector<float> readout = readout_attention(m.att, m.pool, l, h);
        REQUIRE(std::max_element(readout.begin(), readout.end()) - readout.begin() == chosen);
        REQUIRE(readout[size_t(chosen)] > 0.99f);
      }
    // Each layer is (e_chosen + e_i) / 2 for row i; the mean row of two layers puts
    // 3/4 + 1/(4N) on the chosen patch and 1/(4N) on every other.
    const Tensor2 r = attention_rollout(m.att, m.pool, Fusion::mean, 0.0);
    CHECK(r.data()[chosen] == Approx(0.75 + 0.25 / N).margin(1e-3));
    CHECK(r.data()[(chosen + 1) % N] == Approx(0.25 / N).margin(1e-3));

    const Image8 img = grey_image(c.image_size);
    const Canvas grid = render_grid(img, m.att, m.pool, "hand-set");
    const GridLayout g = grid_layout(c.depth, c.heads, G, c.image_size, m.pool, "hand-set");
    CHECK(grid.width == g.width);
    CHECK(grid.height == g.height);
    const Canvas rollout = render_rollout(img, r, m.pool, "hand-set", "note");
    CHECK(rollout.width > 0);
  }
}

TEST_CASE("the summary and the page of a mean-pooled model speak of the mean of the tokens",
          "[attention][forms]") {
  const ModelConfig c = mean_pool_config();
  ViT model(c);
  model.init(14);
  look_at_one_patch(model, 4);
  const AttentionMaps m = collect_attention(model, sine_image(c).data());
  const Tensor2 rollout = attention_rollout(m.att, m.pool, Fusion::mean, 0.0);
  SummaryInputs in;
  in.maps = &m;
  in.rollout = &rollout;
  in.source = {{"file", "x.png"}, {"checkpoint", "c.safetensors"}, {"step", 3}};
  const nlohmann::ordered_json s = attention_summary(in);
  CHECK(s["pool"] == "mean");
  CHECK(s["tokens"] == 9);
  CHECK(s["grid"] == 3);
  CHECK_THAT(s["readout"].get<std::string>(), Contains("no CLS token"));
  CHECK_THAT(s["entropy_over"].get<std::string>(), Contains("mean of all token rows"));
  CHECK_THAT(s["files"]["attention.npy"].get<std::string>(), Contains("T = patches (no CLS token)"));
  CHECK(s["entropy_uniform"].get<double>() == Approx(std::log(9.0)));
  const auto& head = s["attention"][1]["heads"][0];
  CHECK_FALSE(head.contains("cls_to_cls"));
  CHECK(head["top_patches"][0]["patch"] == 4);
  CHECK(head["entropy"].get<double>() < 0.1);
  CHECK(s["rollout"]["top_patches"][0]["patch"] == 4);
  CHECK(s["rollout"]["patch_mass"].get<double>() == Approx(1.0).margin(1e-5));
}
