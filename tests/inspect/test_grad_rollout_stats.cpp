// Gradient rollout's rules on hand-made attention: with a gradient of ones it is attention
// rollout with the heads' mean; weights whose gradient is negative do not count; and the
// attention statistics on patterns whose distance and entropy are known.
#include <catch2/catch.hpp>

#include <cmath>

#include "gradcheck.h"
#include "minivit/inspect/attention_maps.h"
#include "minivit/inspect/attention_stats.h"
#include "minivit/inspect/grad_rollout.h"

using namespace minivit;
using namespace minivit_test;

namespace {

// Random row-stochastic attention (L, H, T, T).
Tensor4 random_attention(size_t L, size_t H, size_t T, uint64_t seed) {
  Tensor4 att = Tensor4::from_shape({L, H, T, T});
  fill_random(att.data(), int64_t(att.size()), 1.0f, seed);
  for (size_t r = 0; r < L * H * T; ++r) {
    float* row = att.data() + r * T;
    double sum = 0.0;
    for (size_t j = 0; j < T; ++j) sum += row[j] = std::exp(row[j]);
    for (size_t j = 0; j < T; ++j) row[j] = float(row[j] / sum);
  }
  return att;
}

}  // namespace

TEST_CASE("gradient rollout with a gradient of ones is attention rollout of the heads' mean",
          "[inspect][grad_rollout]") {
  for (PoolKind pool : {PoolKind::cls, PoolKind::mean}) {
    const size_t T = pool == PoolKind::cls ? 10 : 9;
    const Tensor4 att = random_attention(3, 2, T, 5);
    Tensor4 ones = Tensor4::from_shape(att.shape());
    ones.fill(1.0f);
    const Tensor2 g = gradient_rollout(att, ones, pool);
    const Tensor2 r = attention_rollout(att, pool, Fusion::mean, 0.0);
    REQUIRE(g.shape() == r.shape());
    for (size_t i = 0; i < g.size(); ++i) CHECK(g.data()[i] == Approx(r.data()[i]).epsilon(1e-5));
  }
}

TEST_CASE("gradient rollout counts only weights whose growth raises the class", "[inspect][grad_rollout]") {
  const size_t T = 10;
  const Tensor4 att = random_attention(2, 2, T, 6);
  Tensor4 negative = Tensor4::from_shape(att.shape());
  negative.fill(-1.0f);
  // Nothing counts: every layer is the identity, and the CLS token keeps only itself.
  const Tensor2 none = gradient_rollout(att, negative, PoolKind::cls);
  for (float v : none) CHECK(v == 0.0f);
  // One positive gradient, on layer 1's CLS row at patch 4 in head 0: only that patch is
  // reached from the CLS token.
  Tensor4 one = negative;
  one(1, 0, 0, 5) = 2.0f;
  const Tensor2 g = gradient_rollout(att, one, PoolKind::cls);
  for (size_t p = 0; p < 9; ++p) {
    INFO("patch " << p);
    if (p == 4) {
      const double w = att(1, 0, 0, 5) * 2.0 / 2;  // the heads' mean of max(0, A * dA)
      CHECK(g.data()[p] == Approx(w / (1.0 + w)).epsilon(1e-5));
    } else {
      CHECK(g.data()[p] == 0.0f);
    }
  }
}

TEST_CASE("attention statistics: distance and entropy of known patterns", "[inspect][stats]") {
  ModelConfig c;
  c.image_size = 12;
  c.patch_size = 4;  // 3 x 3 patches, T = 10 with the CLS token
  c.dim = 8;
  c.depth = 2;
  c.heads = 2;
  const int T = 10, G = 3;
  AttentionStats s(c);
  // Layer 0: each token looks only at itself (distance 0, entropy 0). Layer 1: uniform.
  std::vector<float> self(size_t(2) * T * T, 0.0f), uniform(size_t(2) * T * T, 1.0f / T);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < T; ++i) self[(size_t(h) * T + i) * T + i] = 1.0f;
  s.add_layer(0, self.data());
  s.add_layer(1, uniform.data());
  s.count_image();
  CHECK(s.distance(0, 1) == 0.0);
  CHECK(s.entropy(0, 0) == 0.0);
  CHECK(s.entropy(1, 1) == Approx(std::log(double(T))));
  double mean_pair = 0.0;  // the mean grid distance over all ordered pairs of patches
  for (int a = 0; a < G * G; ++a)
    for (int b = 0; b < G * G; ++b) mean_pair += std::hypot(a / G - b / G, a % G - b % G) / (G * G * G * G);
  CHECK(s.distance(1, 0) == Approx(mean_pair));
  const auto j = attention_stats_json(s, "made by hand");
  CHECK(j["images"] == 1);
  CHECK(j["per_layer"][1]["entropy"][0].get<double>() == Approx(std::log(double(T))));
}
