// Mean pooling over the tokens: the definition, and its backward against finite
// differences.
#include <catch2/catch.hpp>
#include <vector>

#include "gradcheck.h"
#include "minivit/nn/mean_pool.h"

using namespace minivit;
using namespace minivit_test;

TEST_CASE("mean pooling averages every token of each image", "[layers][pool]") {
  const int B = 2, T = 3, D = 2;
  // x[b, t, d] = 100 b + 10 t + d
  std::vector<float> x(B * T * D), pooled(B * D);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int d = 0; d < D; ++d) x[(b * T + t) * D + d] = float(100 * b + 10 * t + d);
  mean_pool_forward(pooled.data(), x.data(), B, T, D);
  CHECK(pooled == std::vector<float>{10, 11, 110, 111});
}

TEST_CASE("mean pooling backward spreads the gradient evenly and adds into it",
          "[layers][pool][grad]") {
  const int B = 3, T = 5, D = 4;
  auto x = random_vector(B * T * D, 1.0f, 80), g = random_vector(B * D, 1.0f, 81);
  std::vector<float> pooled(B * D), dx(B * T * D, 0.0f);
  auto f = [&] {
    mean_pool_forward(pooled.data(), x.data(), B, T, D);
    return dot(pooled.data(), g.data(), B * D);
  };
  mean_pool_backward(dx.data(), g.data(), B, T, D, true);
  check_gradients(f, {{"x", x.data(), dx.data(), B * T * D}});
  // Every token of image b receives g[b] / T; a second call adds as much again.
  for (int t = 0; t < T; ++t) CHECK(dx[(2 * T + t) * D + 1] == Approx(g[2 * D + 1] / T));
  mean_pool_backward(dx.data(), g.data(), B, T, D, true);
  CHECK(dx[3] == Approx(2 * g[3] / T));
  // Without add_into it writes what an add into a cleared buffer would, bit for bit.
  std::vector<float> added(dx.size(), 0.0f), written(dx.size(), 7.0f);
  mean_pool_backward(added.data(), g.data(), B, T, D, true);
  mean_pool_backward(written.data(), g.data(), B, T, D, false);
  CHECK(written == added);
}
