// Stochastic depth: timm's per-block rates, one keep decision per image, its scale, the
// draws' independence of how the batch is cut, and its backward.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "gradcheck.h"
#include "minivit/nn/drop_path.h"

using namespace minivit;
using namespace minivit_test;

TEST_CASE("drop-path rates rise linearly from 0 in the first block", "[layers][drop_path]") {
  CHECK(drop_path_rate(0.1f, 0, 6) == 0.0f);
  CHECK(drop_path_rate(0.1f, 5, 6) == 0.1f);
  CHECK(drop_path_rate(0.1f, 2, 6) == Approx(0.04f));
  CHECK(drop_path_rate(0.3f, 0, 1) == 0.0f);  // timm's linspace(0, r, 1) is [0]
}

TEST_CASE("drop path keeps or drops whole images, scaled by 1/(1-p)", "[layers][drop_path]") {
  const int n = 20000;
  const int64_t per_image = 5;
  const auto x = random_vector(n * per_image, 1.0f, 3);
  for (float p : {0.1f, 0.5f}) {
    std::vector<float> y = x, scale(n);
    drop_path_forward(y.data(), scale.data(), n, per_image, p, 77, 0);
    int kept = 0;
    for (int b = 0; b < n; ++b) {
      const bool keep = scale[size_t(b)] != 0.0f;
      kept += keep;
      if (keep) REQUIRE(scale[size_t(b)] == 1.0f / (1.0f - p));
      for (int64_t i = b * per_image; i < (b + 1) * per_image; ++i)
        REQUIRE(y[size_t(i)] == (keep ? x[size_t(i)] * (1.0f / (1.0f - p)) : 0.0f));
    }
    CHECK(double(kept) / n == Approx(1.0 - p).margin(0.01));
    // Backward: the same factor per image, added into the gradient.
    std::vector<float> dx(size_t(n * per_image), 1.0f);
    drop_path_backward(dx.data(), x.data(), scale.data(), n, per_image, true);
    for (int64_t i = 0; i < n * per_image; i += 7)
      REQUIRE(dx[size_t(i)] == 1.0f + x[size_t(i)] * scale[size_t(i / per_image)]);
    // Without add_into: the bits of an add into zeros, the sign of a dropped image's zeros
    // (a negative input times 0) too, whatever the buffer held.
    std::vector<float> into_zeros(dx.size(), 0.0f), written(dx.size(), 7.0f);
    drop_path_backward(into_zeros.data(), x.data(), scale.data(), n, per_image, true);
    drop_path_backward(written.data(), x.data(), scale.data(), n, per_image, false);
    REQUIRE(std::memcmp(into_zeros.data(), written.data(), dx.size() * sizeof(float)) == 0);
    // scale_images is the forward's product on its own, in place.
    std::vector<float> z = x;
    scale_images(z.data(), scale.data(), n, per_image);
    CHECK(z == y);
  }
}

TEST_CASE("drop-path draws depend on the key and the image's index in the whole batch",
          "[layers][drop_path]") {
  const int n = 64, first = 24;
  std::vector<float> ones(n, 1.0f), whole(n), head(first), tail(n - first), other(n);
  drop_path_forward(ones.data(), whole.data(), n, 1, 0.5f, 9, 0);
  ones.assign(n, 1.0f);
  drop_path_forward(ones.data(), head.data(), first, 1, 0.5f, 9, 0);
  drop_path_forward(ones.data() + first, tail.data(), n - first, 1, 0.5f, 9, first);
  CHECK(std::equal(head.begin(), head.end(), whole.begin()));
  CHECK(std::equal(tail.begin(), tail.end(), whole.begin() + first));
  ones.assign(n, 1.0f);
  drop_path_forward(ones.data(), other.data(), n, 1, 0.5f, 10, 0);
  CHECK(other != whole);
}
