// Attention inspection of a sequence-pooled model (model.pool = seq): the head reads the
// tokens weighted by a softmax of learned scores, so "where the model looks" weighs the token
// rows by the image's pooling weights, in the maps, the rollouts, the summary and the page.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "minivit/inspect/attention_maps.h"
#include "minivit/inspect/grad_rollout.h"
#include "minivit/model/vit.h"
#include "small_model.h"

using namespace minivit;
using namespace minivit_test;
using Catch::Matchers::Contains;

namespace {

ModelConfig seq_pool_config() { return small_attention_config(PoolKind::seq); }

// Initialises `model` so that its pooling weights and attention rows differ clearly from
// uniform: larger scores than init gives.
void init_peaked(ViT& model, uint64_t seed) {
  const ModelConfig& c = model.config;
  model.init(seed);
  for (int d = 0; d < c.dim; ++d) model.w.pool_w[d] *= 40.f;
  for (auto& b : model.w.blocks)
    for (int i = 0; i < 2 * c.dim * c.dim; ++i) b.qkv_w[i] *= 10.f;
}

}  // namespace

TEST_CASE("a sequence-pooled model's maps carry its pooling weights, and the readout weighs "
          "the token rows by them", "[attention][forms]") {
  const ModelConfig c = seq_pool_config();
  ViT model(c);
  init_peaked(model, 21);
  const AttentionMaps m = collect_attention(model, sine_image(c).data());
  const size_t N = size_t(c.patches());
  REQUIRE(m.pool == PoolKind::seq);
  REQUIRE(m.pool_weights.size() == N);
  const double total = std::accumulate(m.pool_weights.begin(), m.pool_weights.end(), 0.0);
  CHECK(total == Approx(1.0).margin(1e-5));
  CHECK(*std::min_element(m.pool_weights.begin(), m.pool_weights.end()) >= 0.f);
  // Far from uniform, so a weighted readout and the plain mean tell apart.
  CHECK(*std::max_element(m.pool_weights.begin(), m.pool_weights.end()) > 2.0f / float(N));

  for (int l = 0; l < c.depth; ++l)
    for (int h = 0; h < c.heads; ++h) {
      const std::vector<float> readout = readout_attention(m.att, m.readout(), l, h);
      REQUIRE(readout.size() == N);
      double sum = 0.0, apart = 0.0;
      for (size_t j = 0; j < N; ++j) {
        double weighted = 0.0, mean = 0.0;
        for (size_t i = 0; i < N; ++i) {
          weighted += double(m.pool_weights[i]) * m.att(size_t(l), size_t(h), i, j);
          mean += m.att(size_t(l), size_t(h), i, j) / double(N);
        }
        CHECK(readout[j] == Approx(weighted).margin(1e-6));
        apart = std::max(apart, std::abs(weighted - mean));
        sum += readout[j];
      }
      CHECK(sum == Approx(1.0).margin(1e-5));
      CHECK(apart > 1e-3);
    }

  // The rollout reads the rollout matrix with the same weights, and sums to 1.
  const Tensor2 joint = rollout_matrix(m.att, m.pool, Fusion::mean, 0.0);
  const Tensor2 r = attention_rollout(m.att, m.readout(), Fusion::mean, 0.0);
  double mass = 0.0;
  for (size_t j = 0; j < N; ++j) {
    double weighted = 0.0;
    for (size_t i = 0; i < N; ++i) weighted += double(m.pool_weights[i]) * joint(i, j);
    CHECK(r.data()[j] == Approx(weighted).margin(1e-6));
    mass += r.data()[j];
  }
  CHECK(mass == Approx(1.0).margin(1e-5));
}

TEST_CASE("a one-hot pooling weight reads that token's rows; a seq readout needs one weight per "
          "token", "[attention][rollout][forms]") {
  const size_t T = 4;  // a 2 x 2 grid, no CLS token
  Tensor4 att = Tensor4::from_shape({1, 1, T, T});
  for (size_t i = 0; i < T; ++i)  // distinct entries; the readout needs no normalised rows
    for (size_t j = 0; j < T; ++j) att(0, 0, i, j) = float(1 + i * T + j) / 16.f;
  std::vector<float> one_hot(T, 0.f);
  one_hot[2] = 1.f;
  const Readout readout(PoolKind::seq, one_hot);
  const std::vector<float> row = readout_attention(att, readout, 0, 0);
  for (size_t j = 0; j < T; ++j) CHECK(row[j] == att(0, 0, 2, j));
  const Tensor2 joint = rollout_matrix(att, PoolKind::seq, Fusion::mean, 0.0);
  const Tensor2 r = readout_rollout(joint, readout);
  for (size_t j = 0; j < T; ++j) CHECK(r.data()[j] == Approx(joint(2, j)).margin(1e-7));

  CHECK_THROWS_WITH(readout_attention(att, PoolKind::seq, 0, 0),
                    Contains("one pooling weight per token: got 0 weights for 4 tokens"));
  CHECK_THROWS_WITH(readout_rollout(joint, Readout(PoolKind::seq, {0.5f, 0.5f})),
                    Contains("got 2 weights for 4 tokens"));
}

TEST_CASE("a sequence-pooled model's gradient rollout is read with its pooling weights",
          "[attention][rollout][forms]") {
  const ModelConfig c = seq_pool_config();
  ViT model(c);
  init_peaked(model, 22);
  const Explanation e = explain_class(model, sine_image(c).data(), -1);
  REQUIRE(e.maps.pool_weights.size() == size_t(c.patches()));
  const Tensor2 weighted = gradient_rollout(e.maps.att, e.att_grad, e.maps.readout());
  const Tensor2 plain_mean = gradient_rollout(e.maps.att, e.att_grad, PoolKind::mean);
  double apart = 0.0;
  for (size_t i = 0; i < weighted.size(); ++i) {
    CHECK(e.grad_rollout.data()[i] == weighted.data()[i]);
    apart = std::max(apart, double(std::abs(weighted.data()[i] - plain_mean.data()[i])));
  }
  CHECK(apart > 1e-4);
}

TEST_CASE("the summary of a sequence-pooled model speaks of its pooling weights",
          "[attention][forms]") {
  const ModelConfig c = seq_pool_config();
  ViT model(c);
  init_peaked(model, 23);
  const AttentionMaps m = collect_attention(model, sine_image(c).data());
  const Tensor2 rollout = attention_rollout(m.att, m.readout(), Fusion::mean, 0.0);
  SummaryInputs in;
  in.maps = &m;
  in.rollout = &rollout;
  in.source = {{"file", "x.png"}, {"checkpoint", "c.safetensors"}, {"step", 3}};
  const nlohmann::ordered_json s = attention_summary(in);
  CHECK(s["pool"] == "seq");
  CHECK_THAT(s["readout"].get<std::string>(), Contains("sequence-pooled tokens"));
  CHECK_THAT(s["entropy_over"].get<std::string>(), Contains("weighted by the pooling weights"));
  CHECK_THAT(s["rollout"]["definition"].get<std::string>(), Contains("pool_weights . rollout"));
  CHECK(s["files"].contains("pool_weights.npy"));
  const int top = int(std::max_element(m.pool_weights.begin(), m.pool_weights.end()) -
                      m.pool_weights.begin());
  CHECK(s["pool_weights"]["top_patches"][0]["patch"] == top);
  CHECK(s["pool_weights"]["top_patches"][0]["weight"].get<double>() ==
        Approx(m.pool_weights[size_t(top)]));
  CHECK(std::string(readout_name(PoolKind::seq)) == "the sequence-pooled tokens");
}
