// Patch dropout: how many patches an image keeps (timm's rule), which ones (uniform over the
// patches, independent of how the batch is cut), the gather, its backward as the gather's
// adjoint, the spread back to grid order, and the kept patches' embedding as the gather of
// every patch's.
#include <catch2/catch.hpp>
#include <cstdint>
#include <numeric>
#include <vector>

#include "gradcheck.h"
#include "minivit/core/config.h"
#include "minivit/nn/patch_drop.h"
#include "minivit/nn/patch_embed.h"

using namespace minivit;
using namespace minivit_test;

namespace {

// The keep mask of n images of N patches, `kept` each, drawn under `key` from image 0. It
// starts at 7, neither 0 nor 1, so a byte the draw skipped shows.
std::vector<uint8_t> draw_keep(int n, int N, int kept, uint64_t key) {
  std::vector<uint8_t> keep(size_t(n) * N, 7);
  std::vector<float> draws(size_t(n) * N);
  patch_drop_draw(keep.data(), draws.data(), n, N, kept, key, 0);
  return keep;
}

}  // namespace

TEST_CASE("patch dropout keeps timm's max(1, int(N (1 - rate))) patches", "[layers][patch_drop]") {
  ModelConfig c;  // 28 / 4: 49 patches
  CHECK(c.kept_patches() == 49);
  c.patch_drop = 0.5f;
  CHECK(c.kept_patches() == 24);
  c.patch_drop = 0.1f;
  CHECK(c.kept_patches() == 44);  // int(49 * 0.9) = int(44.1)
  c.patch_drop = 0.99f;
  CHECK(c.kept_patches() == 1);   // int(0.49) = 0, at least one
  CHECK(c.train_tokens() == 1 + 1);  // with the default CLS token
  c.pool = PoolKind::mean;
  CHECK(c.train_tokens() == 1);
  CHECK(c.tokens() == 49);
  CHECK(c.pass_tokens(false) == 49);
  CHECK(c.pass_tokens(true) == 1);
}

TEST_CASE("patch dropout keeps `kept` patches an image, each as often as the others",
          "[layers][patch_drop]") {
  const int n = 4000, N = 16, kept = 6;
  const auto keep = draw_keep(n, N, kept, 99);
  std::vector<int> times(N, 0);
  int same_as_previous = 0;
  for (int b = 0; b < n; ++b) {
    const uint8_t* row = keep.data() + int64_t(b) * N;
    int count = 0;
    for (int i = 0; i < N; ++i) {
      REQUIRE((row[i] == 0 || row[i] == 1));
      count += row[i];
      times[size_t(i)] += row[i];
    }
    REQUIRE(count == kept);
    if (b > 0) same_as_previous += std::equal(row, row + N, row - N);
  }
  // Each patch is kept with probability kept / N = 0.375: about 1500 times in 4000 images,
  // with a standard deviation of about 31.
  for (int i = 0; i < N; ++i) CHECK(std::abs(times[size_t(i)] - 1500) < 160);
  // 8008 subsets: images keeping the same one as the image before are rare.
  CHECK(same_as_previous < 10);
}

TEST_CASE("patch-dropout draws depend on the key and the image's index, not the cut",
          "[layers][patch_drop]") {
  const int n = 40, N = 49, kept = 24, first = 13;
  std::vector<uint8_t> whole(size_t(n) * N), head(size_t(first) * N),
      tail(size_t(n - first) * N), other(size_t(n) * N), shifted(size_t(n) * N);
  std::vector<float> draws(size_t(n) * N);
  patch_drop_draw(whole.data(), draws.data(), n, N, kept, 5, 100);
  patch_drop_draw(head.data(), draws.data(), first, N, kept, 5, 100);
  patch_drop_draw(tail.data(), draws.data(), n - first, N, kept, 5, 100 + first);
  head.insert(head.end(), tail.begin(), tail.end());
  CHECK(head == whole);
  patch_drop_draw(other.data(), draws.data(), n, N, kept, 6, 100);
  CHECK(other != whole);
  patch_drop_draw(shifted.data(), draws.data(), n, N, kept, 5, 101);
  CHECK(std::equal(shifted.begin(), shifted.end() - N, whole.begin() + N));
}

TEST_CASE("patch dropout gathers the prefix and the kept patches in grid order; backward is "
          "its adjoint", "[layers][patch_drop]") {
  const int n = 3, N = 9, kept = 4, D = 5;
  for (int prefix : {0, 1}) {
    INFO("prefix " << prefix);
    const auto keep = draw_keep(n, N, kept, 21);
    const auto tokens = random_vector(n * (prefix + N) * D, 1.0f, 3);
    std::vector<float> out(size_t(n) * (prefix + kept) * D, -9.0f);
    patch_drop_forward(out.data(), tokens.data(), keep.data(), n, prefix, N, kept, D);
    for (int b = 0; b < n; ++b) {
      const float* image = tokens.data() + int64_t(b) * (prefix + N) * D;
      const float* rows = out.data() + int64_t(b) * (prefix + kept) * D;
      std::vector<int> taken;
      for (int r = 0; r < prefix; ++r) taken.push_back(r);
      for (int i = 0; i < N; ++i)
        if (keep[size_t(b * N + i)]) taken.push_back(prefix + i);
      REQUIRE(int(taken.size()) == prefix + kept);
      for (int r = 0; r < prefix + kept; ++r)
        for (int d = 0; d < D; ++d)
          REQUIRE(rows[r * D + d] == image[taken[size_t(r)] * D + d]);
    }
    // <forward(x), y> = <x, backward(y)>; backward adds into what is there.
    const auto y = random_vector(int64_t(out.size()), 1.0f, 4);
    std::vector<float> dtokens(tokens.size(), 0.5f);
    patch_drop_backward(dtokens.data(), y.data(), keep.data(), n, prefix, N, kept, D, true);
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < out.size(); ++i) lhs += double(out[i]) * y[i];
    for (size_t i = 0; i < tokens.size(); ++i) rhs += double(tokens[i]) * (dtokens[i] - 0.5f);
    CHECK(lhs == Approx(rhs).epsilon(1e-6));
    // A dropped patch's rows take nothing.
    for (int b = 0; b < n; ++b)
      for (int i = 0; i < N; ++i)
        if (!keep[size_t(b * N + i)])
          for (int d = 0; d < D; ++d)
            REQUIRE(dtokens[size_t((b * (prefix + N) + prefix + i) * D + d)] == 0.5f);
    // Without add_into it writes what an add into a cleared buffer would, bit for bit.
    std::vector<float> added(tokens.size(), 0.0f), written(tokens.size(), -9.0f);
    patch_drop_backward(added.data(), y.data(), keep.data(), n, prefix, N, kept, D, true);
    patch_drop_backward(written.data(), y.data(), keep.data(), n, prefix, N, kept, D, false);
    CHECK(written == added);
  }
}

TEST_CASE("patch_drop_spread puts the kept rows back in grid order and zeros the dropped ones",
          "[layers][patch_drop]") {
  const int n = 3, N = 9, kept = 4, D = 5;
  const auto keep = draw_keep(n, N, kept, 22);
  const auto full = random_vector(n * N * D, 1.0f, 5);
  std::vector<float> kept_rows(size_t(n) * kept * D), spread(full.size(), -9.0f);
  patch_drop_forward(kept_rows.data(), full.data(), keep.data(), n, 0, N, kept, D);
  patch_drop_spread(spread.data(), kept_rows.data(), keep.data(), n, N, kept, D);
  for (int i = 0; i < n * N; ++i)
    for (int d = 0; d < D; ++d)
      REQUIRE(spread[size_t(i * D + d)] == (keep[size_t(i)] ? full[size_t(i * D + d)] : 0.0f));
}

TEST_CASE("the kept patches' embedding is the gather of every patch's, bit for bit",
          "[layers][patch_drop][patch]") {
  const int n = 3, N = 9, kept = 4, D = 21;
  const auto keep = draw_keep(n, N, kept, 31);
  const auto proj = random_vector(n * N * D, 1.0f, 6), cls = random_vector(D, 1.0f, 7),
             pos = random_vector((N + 1) * D, 1.0f, 8);
  for (const bool with_cls : {true, false})
    for (const bool with_pos : {true, false}) {
      INFO((with_cls ? "CLS token" : "no CLS token") << ", "
           << (with_pos ? "positions" : "no positions"));
      const int prefix = with_cls ? 1 : 0;
      const float* cls_token = with_cls ? cls.data() : nullptr;
      const float* positions = with_pos ? pos.data() + (with_cls ? 0 : D) : nullptr;
      // Every patch embedded, then the kept tokens gathered: what the model computed before
      // it embedded the kept patches alone.
      std::vector<float> every(size_t(n) * (prefix + N) * D), gathered(size_t(n) * (prefix + kept) * D);
      embed_tokens_forward(every.data(), proj.data(), cls_token, positions, n, N, D);
      patch_drop_forward(gathered.data(), every.data(), keep.data(), n, prefix, N, kept, D);
      std::vector<float> kept_proj(size_t(n) * kept * D), tokens(gathered.size(), -9.0f);
      patch_drop_forward(kept_proj.data(), proj.data(), keep.data(), n, 0, N, kept, D);
      embed_tokens_forward(tokens.data(), kept_proj.data(), cls_token, positions, n, N, D,
                           keep.data(), kept);
      CHECK(tokens == gathered);
      // A patch's token holds its own position, not that of its place among the kept: the
      // first image's last kept patch lies past place kept - 1 in the grid.
      if (with_pos) {
        int last = N - 1;
        while (!keep[size_t(last)]) --last;
        REQUIRE(last > kept - 1);
        const size_t place = size_t(kept - 1) * D;
        CHECK(tokens[size_t(prefix * D) + place] ==
              kept_proj[place] + positions[size_t((prefix + last) * D)]);
      }
    }
}
