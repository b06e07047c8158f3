// Sequence pooling (CCT's SeqPool): the definition, and its backward against finite
// differences.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "gradcheck.h"
#include "level.h"
#include "minivit/nn/seq_pool.h"

using namespace minivit;
using namespace minivit_test;

TEST_CASE("sequence pooling weighs each token by the softmax of its score", "[layers][pool]") {
  const int B = 2, T = 3, D = 2;
  // x[b, t, d] = 100 b + 10 t + d, scored by w = (0.01, -0.02).
  std::vector<float> x(B * T * D), pooled(B * D), weights(B * T);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int d = 0; d < D; ++d) x[(b * T + t) * D + d] = float(100 * b + 10 * t + d);
  const std::vector<float> w{0.01f, -0.02f};
  seq_pool_forward(pooled.data(), weights.data(), x.data(), w.data(), B, T, D);
  for (int b = 0; b < B; ++b) {
    double score[T], total = 0.0;
    for (int t = 0; t < T; ++t) {
      const float* row = &x[(b * T + t) * D];
      score[t] = std::exp(0.01 * row[0] - 0.02 * row[1]);
      total += score[t];
    }
    for (int d = 0; d < D; ++d) {
      double expected = 0.0;
      for (int t = 0; t < T; ++t) {
        CHECK(weights[b * T + t] == Approx(score[t] / total).epsilon(1e-6));
        expected += score[t] / total * x[(b * T + t) * D + d];
      }
      CHECK(pooled[b * D + d] == Approx(expected).epsilon(1e-6));
    }
  }
}

TEST_CASE("sequence pooling with equal scores is the mean", "[layers][pool]") {
  const int B = 2, T = 4, D = 3;
  auto x = random_vector(B * T * D, 1.0f, 90);
  std::vector<float> w(D, 0.0f), pooled(B * D), weights(B * T);
  seq_pool_forward(pooled.data(), weights.data(), x.data(), w.data(), B, T, D);
  for (float a : weights) CHECK(a == Approx(0.25f));
  for (int d = 0; d < D; ++d)
    CHECK(pooled[D + d] ==
          Approx((x[12 + d] + x[15 + d] + x[18 + d] + x[21 + d]) / 4.0f).epsilon(1e-6));
}

TEST_CASE("sequence pooling backward matches finite differences and adds into gradients",
          "[layers][pool][grad]") {
  const int B = 3, T = 5, D = 4;
  auto x = random_vector(B * T * D, 1.0f, 91), w = random_vector(D, 0.7f, 92),
       g = random_vector(B * D, 1.0f, 94);
  std::vector<float> pooled(B * D), weights(B * T), score_grads(B * T);
  auto f = [&] {
    seq_pool_forward(pooled.data(), weights.data(), x.data(), w.data(), B, T, D);
    return dot(pooled.data(), g.data(), B * D);
  };
  f();
  std::vector<float> dx(B * T * D, 0.0f), dw(D, 0.0f);
  seq_pool_backward(dx.data(), dw.data(), g.data(), weights.data(), x.data(), w.data(), B, T,
                    D, score_grads.data());
  check_gradients(f, {{"x", x.data(), dx.data(), B * T * D}, {"w", w.data(), dw.data(), D}},
                  1e-3);
  const std::vector<float> dx1 = dx, dw1 = dw;
  f();  // the weights of the unperturbed inputs again
  seq_pool_backward(dx.data(), dw.data(), g.data(), weights.data(), x.data(), w.data(), B, T,
                    D, score_grads.data());
  for (int i = 0; i < B * T * D; ++i) CHECK(dx[i] == Approx(2 * dx1[i]));
  for (int d = 0; d < D; ++d) CHECK(dw[d] == Approx(2 * dw1[d]));
}

TEST_CASE("sequence pooling's gradients do not depend on the thread count",
          "[layers][pool][threads]") {
  const int B = 64, T = 17, D = 24;
  auto x = random_vector(B * T * D, 1.0f, 95), w = random_vector(D, 0.5f, 96),
       g = random_vector(B * D, 1.0f, 97);
  auto run = [&](int threads) {
    ThreadsScope scope(threads);
    std::vector<float> pooled(B * D), weights(B * T), score_grads(B * T);
    std::vector<float> dx(B * T * D, 0.0f), dw(D, 0.0f);
    seq_pool_forward(pooled.data(), weights.data(), x.data(), w.data(), B, T, D);
    seq_pool_backward(dx.data(), dw.data(), g.data(), weights.data(), x.data(), w.data(), B, T,
                      D, score_grads.data());
    pooled.insert(pooled.end(), dx.begin(), dx.end());
    pooled.insert(pooled.end(), dw.begin(), dw.end());
    return pooled;
  };
  CHECK(run(1) == run(2));
}
