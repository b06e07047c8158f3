// Finite-difference checks of every layer's backward, and the forward definitions they
// rest on (LayerNorm statistics, exact GELU, dropout's keep rate and scale). The attention
// core has its own file, test_attention.cpp.
#include <catch2/catch.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "gradcheck.h"
#include "minivit/nn/cross_entropy.h"
#include "minivit/nn/dropout.h"
#include "minivit/nn/gelu.h"
#include "minivit/nn/layernorm.h"
#include "minivit/nn/linear.h"
#include "minivit/nn/patch_embed.h"
#include "level.h"

using namespace minivit;
using namespace minivit_test;

TEST_CASE("linear forward is x W^T + b", "[layers][linear]") {
  const float x[2 * 3] = {1, 2, 3, 4, 5, 6};
  const float W[2 * 3] = {1, 0, -1, 0.5f, 0.5f, 0.5f};
  const float b[2] = {0.25f, -1};
  float y[4];
  linear_forward(y, x, W, b, 2, 3, 2, level_products());
  CHECK(y[0] == Approx(1 - 3 + 0.25f));
  CHECK(y[1] == Approx(3 - 1));
  CHECK(y[2] == Approx(4 - 6 + 0.25f));
  CHECK(y[3] == Approx(7.5f - 1));
}

TEST_CASE("a linear forward from the transposed weight gives the same bits as from the weight",
          "[layers][linear]") {
  // Widths whose transposes the kernels read in place (multiples of 64) and widths they
  // still pack; 200 rows cross a block of rows; 130 inputs a block of k. The residual and
  // GELU stores too, and bf16 products where this level has them. OpenBLAS too, which every
  // level may be told to use, and whose small-matrix kernels sum the two orientations in
  // different orders (1 x 64 x 128 on its Cooperlake kernels).
  const Products openblas{GemmKernels::openblas, Precision::fp32};
  for (const Products products : {level_products(Precision::fp32),
                                  level_products(Precision::bf16), openblas})
    for (const auto [R, I, O] : {std::array{200, 64, 192}, std::array{37, 130, 64},
                                 std::array{9, 24, 40}, std::array{1, 64, 128}}) {
      INFO("R " << R << " I " << I << " O " << O << " kernels " << int(products.kernels)
                << " bf16 " << (products.precision == Precision::bf16));
      const auto x = random_vector(R * I, 1.0f, 41), W = random_vector(O * I, 0.5f, 42);
      const auto b = random_vector(O, 0.5f, 43), residual = random_vector(R * O, 1.0f, 44);
      std::vector<float> Wt(size_t(I) * O);
      for (int o = 0; o < O; ++o)
        for (int i = 0; i < I; ++i) Wt[size_t(i) * O + o] = W[size_t(o) * I + i];
      auto both = [&](auto&& forward) {
        std::vector<float> from_rows(size_t(R) * O * 2), from_columns(from_rows.size());
        forward(from_rows.data(), LinearWeight(W.data()));
        forward(from_columns.data(), LinearWeight(W.data(), Wt.data()));
        REQUIRE(std::memcmp(from_rows.data(), from_columns.data(), from_rows.size() * 4) == 0);
      };
      both([&](float* out, LinearWeight w) {
        linear_forward(out, x.data(), w, b.data(), R, I, O, products);
      });
      both([&](float* out, LinearWeight w) {
        linear_residual_forward(out, x.data(), w, b.data(), residual.data(), R, I, O, products);
      });
      for (const bool slope : {false, true})
        both([&](float* out, LinearWeight w) {
          linear_gelu_forward(out, out + int64_t(R) * O, x.data(), w, b.data(), R, I, O, products,
                              slope);
        });
    }
}

TEST_CASE("linear backward matches finite differences", "[layers][linear][grad]") {
  const int R = 5, I = 7, O = 4;
  auto x = random_vector(R * I, 1.0f, 1), W = random_vector(O * I, 0.5f, 2),
       b = random_vector(O, 0.5f, 3), g = random_vector(R * O, 1.0f, 4);
  std::vector<float> y(R * O), dx(R * I, 0.0f), dW(O * I, 0.0f), db(O, 0.0f);
  auto f = [&] {
    linear_forward(y.data(), x.data(), W.data(), b.data(), R, I, O, level_products());
    return dot(y.data(), g.data(), R * O);
  };
  f();
  linear_backward(dx.data(), dW.data(), db.data(), g.data(), x.data(), W.data(), R, I, O,
                  level_products());
  check_gradients(f, {{"x", x.data(), dx.data(), R * I}, {"W", W.data(), dW.data(), O * I},
                      {"b", b.data(), db.data(), O}});
}

TEST_CASE("linear backward adds into existing gradients", "[layers][linear]") {
  const int R = 3, I = 2, O = 2;
  auto x = random_vector(R * I, 1.0f, 5), W = random_vector(O * I, 1.0f, 6),
       g = random_vector(R * O, 1.0f, 7);
  std::vector<float> dx1(R * I, 0.0f), dW1(O * I, 0.0f), db1(O, 0.0f);
  linear_backward(dx1.data(), dW1.data(), db1.data(), g.data(), x.data(), W.data(), R, I, O,
                  level_products());
  std::vector<float> dx2(R * I, 1.0f), dW2(O * I, 1.0f), db2(O, 1.0f);
  linear_backward(dx2.data(), dW2.data(), db2.data(), g.data(), x.data(), W.data(), R, I, O,
                  level_products());
  for (int i = 0; i < R * I; ++i) CHECK(dx2[i] == Approx(dx1[i] + 1.0f));
  for (int i = 0; i < O * I; ++i) CHECK(dW2[i] == Approx(dW1[i] + 1.0f));
  for (int i = 0; i < O; ++i) CHECK(db2[i] == Approx(db1[i] + 1.0f));
}

TEST_CASE("layernorm normalises each row with eps 1e-6", "[layers][layernorm]") {
  const int R = 3, D = 16;
  auto x = random_vector(R * D, 3.0f, 10);
  std::vector<float> w(D, 1.0f), b(D, 0.0f), y(R * D), mean(R), rstd(R);
  layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), R, D);
  for (int r = 0; r < R; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < D; ++i) m += y[r * D + i];
    for (int i = 0; i < D; ++i) v += y[r * D + i] * y[r * D + i];
    CHECK(m / D == Approx(0.0).margin(1e-5));
    CHECK(v / D == Approx(1.0).epsilon(1e-4));
  }
  // A constant row: variance 0, so eps alone sets the scale and the output is exactly b.
  std::vector<float> c(D, 2.5f), yc(D);
  float mc, rc;
  layernorm_forward(yc.data(), &mc, &rc, c.data(), w.data(), b.data(), 1, D);
  CHECK(rc == Approx(1.0 / std::sqrt(1e-6)));
  for (float v : yc) CHECK(v == 0.0f);
}

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
// The sums of one row as the vector builds have always rounded them: one vector's lanes (16
// in AVX-512 builds, 8 in AVX2 ones), lane k summing elements k, k + lanes, ... in order,
// then the lanes in order from 0; the squares by fused multiply-adds.
#if defined(__AVX512F__)
constexpr int kRowLanes = 16;
#else
constexpr int kRowLanes = 8;
#endif
struct RowInLanes {
  float mean, rstd;
};
RowInLanes row_in_lanes(const float* x, int D) {
  float lanes[kRowLanes] = {};
  for (int i = 0; i < D; ++i) lanes[i % kRowLanes] += x[i];
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  const float m = sum / float(D);
  std::fill_n(lanes, kRowLanes, 0.0f);
  for (int i = 0; i < D; ++i)
    lanes[i % kRowLanes] = std::fma(x[i] - m, x[i] - m, lanes[i % kRowLanes]);
  float var = 0.0f;
  for (float lane : lanes) var += lane;
  return {m, 1.0f / std::sqrt(var / float(D) + kLayerNormEps)};
}
#define MINIVIT_TEST_ROW_IN_LANES 1
#endif

// The vector builds normalise a vector's width of rows at once (16 in AVX-512 builds, 8 in
// AVX2 ones) where D is a multiple of it. Each row must round as it does alone, and as its
// sums in those lanes round.
TEST_CASE("layernorm rounds each row as it rounds alone, whatever rows come with it",
          "[layers][layernorm]") {
  for (int D : {16, 64, 96, 40}) {
    const int R = 37;  // blocks of 16 (AVX-512) or 8 (AVX2) and rows over
    auto x = random_vector(R * D, 3.0f, 11 + D);
    for (int i = 0; i < R * D; i += 7) x[i] += 1000.0f;  // sums that round
    const auto w = random_vector(D, 1.0f, 12), b = random_vector(D, 1.0f, 13);
    std::vector<float> y(R * D), mean(R), rstd(R);
    layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), R, D);
    for (int r = 0; r < R; ++r) {
      INFO("D " << D << ", row " << r);
      std::vector<float> alone(D);
      float m, s;
      layernorm_forward(alone.data(), &m, &s, x.data() + r * D, w.data(), b.data(), 1, D);
      REQUIRE(mean[r] == m);
      REQUIRE(rstd[r] == s);
      for (int i = 0; i < D; ++i) REQUIRE(y[r * D + i] == alone[i]);
#if defined(MINIVIT_TEST_ROW_IN_LANES)
      if (D % kRowLanes == 0) {
        const RowInLanes expected = row_in_lanes(x.data() + r * D, D);
        REQUIRE(m == expected.mean);
        REQUIRE(s == expected.rstd);
        for (int i = 0; i < D; ++i)
          REQUIRE(alone[i] == std::fma((x[r * D + i] - m) * s, w[i], b[i]));
      }
#endif
    }
  }
}

// The input gradient's two row sums in lanes as row_in_lanes's, every other operation as
// the compiler fuses the row loop of layernorm.cpp: each row's gradient must round so,
// whatever rows come with it. At the AVX2 level that row loop is plain C, which the
// sanitizers' instrumentation leaves the compiler fusing otherwise: there the check is the
// plain build's.
#if defined(MINIVIT_TEST_ROW_IN_LANES) && (defined(__AVX512F__) || !defined(__SANITIZE_ADDRESS__))
TEST_CASE("layernorm's input gradient rounds each row as the row loop does",
          "[layers][layernorm]") {
  for (int D : {16, 64, 96}) {
    if (D % kRowLanes) continue;
    const int R = 37;
    auto x = random_vector(R * D, 3.0f, 31 + D), dy = random_vector(R * D, 1.0f, 32 + D),
         base = random_vector(R * D, 1.0f, 33 + D);
    for (int i = 0; i < R * D; i += 7) x[i] += 1000.0f;
    const auto w = random_vector(D, 1.0f, 34);
    std::vector<float> y(R * D), mean(R), rstd(R), dx(R * D);
    layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), w.data(), R, D);
    layernorm_backward_input(dx.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(),
                             R, D, base.data());
    for (int r = 0; r < R; ++r) {
      INFO("D " << D << ", row " << r);
      const float m = mean[r], s = rstd[r];
      const float* xr = x.data() + r * D;
      const float* dyr = dy.data() + r * D;
      float sum_lanes[kRowLanes] = {}, product_lanes[kRowLanes] = {};
      for (int i = 0; i < D; ++i) {
        const float xhat = (xr[i] - m) * s, dxhat = dyr[i] * w[i];
        sum_lanes[i % kRowLanes] += dxhat;
        product_lanes[i % kRowLanes] = std::fma(xhat, dxhat, product_lanes[i % kRowLanes]);
      }
      float a = 0.0f, b = 0.0f;
      for (int k = 0; k < kRowLanes; ++k) a += sum_lanes[k];
      for (int k = 0; k < kRowLanes; ++k) b += product_lanes[k];
      a /= float(D);
      b /= float(D);
      for (int i = 0; i < D; ++i) {
        const float xhat = (xr[i] - m) * s;
        const float t = std::fma(dyr[i], w[i], -a);
        REQUIRE(dx[r * D + i] == std::fma(std::fma(-xhat, b, t), s, base[r * D + i]));
      }
    }
  }
}
#endif

TEST_CASE("layernorm backward matches finite differences", "[layers][layernorm][grad]") {
  const int R = 6, D = 8;
  auto x = random_vector(R * D, 1.0f, 11), w = random_vector(D, 0.5f, 12),
       b = random_vector(D, 0.5f, 13), g = random_vector(R * D, 1.0f, 14);
  for (auto& v : w) v += 1.0f;
  std::vector<float> y(R * D), mean(R), rstd(R), dx(R * D, 0.0f), dw(D, 0.0f), db(D, 0.0f);
  auto f = [&] {
    layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), R, D);
    return dot(y.data(), g.data(), R * D);
  };
  f();
  std::vector<float> partials(size_t(layernorm_partials_floats(D)));
  layernorm_backward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), R, D, partials.data());
  check_gradients(f, {{"x", x.data(), dx.data(), R * D}, {"weight", w.data(), dw.data(), D},
                      {"bias", b.data(), db.data(), D}}, 1e-3);
}

TEST_CASE("gelu is the exact erf form", "[layers][gelu]") {
  const float x[5] = {-3.0f, -1.0f, 0.0f, 0.5f, 2.0f};
  float pre[5], y[5];
  const float zero_bias[5] = {0, 0, 0, 0, 0};
  std::copy(x, x + 5, pre);
  bias_gelu_forward(y, pre, zero_bias, 1, 5);
  for (int i = 0; i < 5; ++i)
    CHECK(y[i] == Approx(0.5 * x[i] * (1 + std::erf(x[i] / std::sqrt(2.0)))).epsilon(2e-6));
  CHECK(y[1] == Approx(-0.15865525393145707).epsilon(1e-6));  // torch.nn.functional.gelu(-1.)
}

TEST_CASE("the fused bias is added on every row and kept for backward", "[layers][gelu]") {
  const float bias[3] = {0.5f, -1.0f, 2.0f};
  float pre[6] = {0, 0, 0, 1, 1, 1}, y[6];
  bias_gelu_forward(y, pre, bias, 2, 3);
  const float expected_pre[6] = {0.5f, -1.0f, 2.0f, 1.5f, 0.0f, 3.0f};
  for (int i = 0; i < 6; ++i) {
    CHECK(pre[i] == expected_pre[i]);
    CHECK(y[i] == Approx(0.5 * pre[i] * (1 + std::erf(pre[i] / std::sqrt(2.0)))).epsilon(2e-6));
  }
}

TEST_CASE("gelu backward matches finite differences", "[layers][gelu][grad]") {
  const int R = 4, M = 16, n = R * M;
  auto x = random_vector(n, 2.0f, 20), g = random_vector(n, 1.0f, 21),
       bias = random_vector(M, 0.5f, 22);
  std::vector<float> pre(n), y(n), dx(n, 0.0f);
  auto f = [&] {
    pre = x;
    bias_gelu_forward(y.data(), pre.data(), bias.data(), R, M);
    return dot(y.data(), g.data(), n);
  };
  f();
  gelu_backward(dx.data(), pre.data(), g.data(), n);  // d/dpre = d/dx: the bias is a shift
  check_gradients(f, {{"x", x.data(), dx.data(), n}}, 1e-3);
}

TEST_CASE("gelu backward sets without adding into, bit for bit as adding into zeros",
          "[layers][gelu]") {
  // Past a whole number of vectors, across thread cuts, with gradients and inputs of both
  // signs and inputs far enough out that the slope is exactly 0 (a zero of either sign).
  const int64_t n = 70001;
  auto x = random_vector(n, 8.0f, 23), g = random_vector(n, 1.0f, 24);
  for (int64_t i = 0; i < n; i += 97) x[size_t(i)] = i % 2 ? -40.0f : 40.0f;
  std::vector<float> added(n, 0.0f), set(n, std::numeric_limits<float>::quiet_NaN());
  gelu_backward(added.data(), x.data(), g.data(), n);
  gelu_backward(set.data(), x.data(), g.data(), n, false);
  REQUIRE(std::memcmp(added.data(), set.data(), sizeof(float) * size_t(n)) == 0);
  std::vector<float> twice = added;
  gelu_backward(twice.data(), x.data(), g.data(), n);  // adds a second time
  CHECK(twice[1] == 2.0f * added[1]);
}

TEST_CASE("a training forward's GELU slope gives backward's gradient bit for bit",
          "[layers][gelu]") {
  // Rows of 100: six whole vectors and a padded one, whose slopes must round as the vector
  // body's; inputs far enough out that the slope is exactly 0.
  const int R = 701, M = 100;
  const int64_t n = int64_t(R) * M;
  auto x = random_vector(n, 8.0f, 25), g = random_vector(n, 1.0f, 26),
       bias = random_vector(M, 0.5f, 27);
  for (int64_t i = 0; i < n; i += 97) x[size_t(i)] = i % 2 ? -40.0f : 40.0f;
  std::vector<float> pre = x, slope = x, y(n), y_slope(n), from_pre(n), from_slope(n);
  bias_gelu_forward(y.data(), pre.data(), bias.data(), R, M);
  bias_gelu_forward(y_slope.data(), slope.data(), bias.data(), R, M, true);
  REQUIRE(std::memcmp(y.data(), y_slope.data(), sizeof(float) * size_t(n)) == 0);
  gelu_backward(from_pre.data(), pre.data(), g.data(), n, false);
  gelu_backward_slope(from_slope.data(), slope.data(), g.data(), n);
  REQUIRE(std::memcmp(from_pre.data(), from_slope.data(), sizeof(float) * size_t(n)) == 0);
}

TEST_CASE("GELU over the rows in use: the others zero in output and slope, the rest unchanged",
          "[layers][gelu]") {
  const int R = 300, M = 100;  // enough rows for the pool to cut them
  const int64_t n = int64_t(R) * M;
  const auto x = random_vector(n, 4.0f, 28), bias = random_vector(M, 0.5f, 29);
  std::vector<uint8_t> used(static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) used[size_t(r)] = r % 3 != 1;
  for (bool slope_in_pre : {false, true}) {
    std::vector<float> pre = x, y(n), pre_all = x, y_all(n);
    bias_gelu_forward(y.data(), pre.data(), bias.data(), R, M, slope_in_pre, used.data());
    bias_gelu_forward(y_all.data(), pre_all.data(), bias.data(), R, M, slope_in_pre);
    for (int r = 0; r < R; ++r) {
      INFO("slope in pre " << slope_in_pre << ", row " << r);
      const size_t at = size_t(r) * M;
      if (used[size_t(r)]) {
        REQUIRE(std::memcmp(y.data() + at, y_all.data() + at, sizeof(float) * M) == 0);
        REQUIRE(std::memcmp(pre.data() + at, pre_all.data() + at, sizeof(float) * M) == 0);
      } else {
        REQUIRE(std::all_of(y.begin() + at, y.begin() + at + M, [](float v) { return v == 0; }));
        REQUIRE(std::all_of(pre.begin() + at, pre.begin() + at + M,
                            [](float v) { return v == 0; }));
      }
    }
  }
}

TEST_CASE("fc1 and fc2 with GELU's slope in their products' stores give the separate passes' "
          "bits", "[layers][gelu]") {
  // This level's own kernels, as a CPU of this level runs them: MLP widths that end in a
  // partial vector and a partial tile; one and two blocks of k.
  for (int D : {64, 300})
  for (int M : {100, 128, 37}) {
    const int R = D == 64 ? 1920 : 300;
    auto inp = random_vector(int64_t(R) * D, 1.0f, 30), w1 = random_vector(int64_t(M) * D, 0.1f, 31),
         b1 = random_vector(M, 0.5f, 32), w2 = random_vector(int64_t(D) * M, 0.1f, 33),
         dout = random_vector(int64_t(R) * D, 1.0f, 34);
    const size_t n = size_t(R) * size_t(M);
    std::vector<float> pre(n), h(n), dh(n), dpre(n), slope(n), h_fused(n), dpre_fused(n);
    linear_forward(pre.data(), inp.data(), w1.data(), b1.data(), R, D, M, level_products());
    std::vector<float> pre_biased = pre;
    std::vector<float> zero_bias(size_t(M), 0.0f);
    bias_gelu_forward(h.data(), pre_biased.data(), zero_bias.data(), R, M);
    linear_backward_input(dh.data(), dout.data(), w2.data(), R, M, D, false, level_products());
    gelu_backward(dpre.data(), pre.data(), dh.data(), int64_t(n), false);

    linear_gelu_forward(slope.data(), h_fused.data(), inp.data(), w1.data(), b1.data(), R, D, M,
                        level_products(), true);
    linear_backward_input_gelu(dpre_fused.data(), dout.data(), w2.data(), slope.data(), R, M, D,
                               level_products());
    INFO("M " << M << " D " << D);
    REQUIRE(std::memcmp(h.data(), h_fused.data(), sizeof(float) * n) == 0);
    REQUIRE(std::memcmp(dpre.data(), dpre_fused.data(), sizeof(float) * n) == 0);
  }
}

TEST_CASE("dropout keeps 1-p of the units and scales them by 1/(1-p)", "[layers][dropout]") {
  const int64_t n = 200000;
  std::vector<float> x(n, 1.0f), y(n);
  std::vector<uint8_t> mask(n);
  for (float p : {0.1f, 0.3f, 0.5f}) {
    dropout_forward(y.data(), mask.data(), x.data(), n, p, 1234);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (mask[i]) {
        ++kept;
        REQUIRE(y[i] == Approx(1.0f / (1.0f - p)));
      } else {
        REQUIRE(y[i] == 0.0f);
      }
    }
    CHECK(double(kept) / n == Approx(1.0 - p).margin(0.005));
    // The expected value is preserved.
    CHECK(std::accumulate(y.begin(), y.end(), 0.0) / n == Approx(1.0).margin(0.01));
    // Backward routes the gradient through the same units with the same scale.
    std::vector<float> dx(n, 0.0f);
    dropout_backward(dx.data(), x.data(), mask.data(), n, p, true);
    for (int64_t i = 0; i < n; i += 97) REQUIRE(dx[i] == y[i]);
    // Without add_into: the bits of the add into zeros, whatever the buffer held.
    std::vector<float> written(n, 7.0f);
    dropout_backward(written.data(), x.data(), mask.data(), n, p, false);
    REQUIRE(std::memcmp(written.data(), dx.data(), size_t(n) * sizeof(float)) == 0);
  }
}

TEST_CASE("dropout with p = 0 is the identity", "[layers][dropout]") {
  auto x = random_vector(1000, 1.0f, 30);
  std::vector<float> y(1000), dx(1000, 0.0f), written(1000, 7.0f);
  dropout_forward(y.data(), nullptr, x.data(), 1000, 0.0f, 1);
  CHECK(y == x);
  dropout_backward(dx.data(), x.data(), nullptr, 1000, 0.0f, true);
  CHECK(dx == x);
  dropout_backward(written.data(), x.data(), nullptr, 1000, 0.0f, false);
  CHECK(written == x);
}

TEST_CASE("dropout masks depend only on the key and the element index", "[layers][dropout]") {
  const int64_t n = 5000;
  std::vector<float> x(n, 1.0f), y(n);
  std::vector<uint8_t> a(n), b(n), c(n);
  dropout_forward(y.data(), a.data(), x.data(), n, 0.5f, 42);
  dropout_forward(y.data(), b.data(), x.data(), n, 0.5f, 42);
  dropout_forward(y.data(), c.data(), x.data(), n, 0.5f, 43);
  CHECK(a == b);
  CHECK(a != c);
}

TEST_CASE("patchify flattens patches in (channel, row, column) order", "[layers][patch]") {
  const int B = 1, C = 2, S = 4, P = 2;
  std::vector<float> img(B * C * S * S);
  std::iota(img.begin(), img.end(), 0.0f);  // value = c*16 + y*4 + x
  std::vector<float> patches(4 * C * P * P);
  patchify(patches.data(), img.data(), B, C, S, P);
  // Patch 1 is grid row 0, column 1: pixels x in {2,3}, y in {0,1}.
  const float expected[8] = {2, 3, 6, 7, 18, 19, 22, 23};
  for (int i = 0; i < 8; ++i) CHECK(patches[1 * 8 + i] == expected[i]);
  // Patch 2 is grid row 1, column 0.
  CHECK(patches[2 * 8 + 0] == 8.0f);
}

TEST_CASE("shifted patches: the patch, then its window in four diagonal shifts, zero outside",
          "[layers][patch]") {
  const int B = 2, C = 2, S = 6, P = 2, G = S / P, N = G * G, len = 5 * C * P * P;
  std::vector<float> img(B * C * S * S);
  std::iota(img.begin(), img.end(), 1.0f);  // no pixel is 0, so a 0 is always padding
  std::vector<float> plain(B * N * C * P * P), shifted(B * N * len);
  patchify(plain.data(), img.data(), B, C, S, P);
  patchify(shifted.data(), img.data(), B, C, S, P, true);
  // The pixel copy k shows at (y, x): the image at (y + dy, x + dx), half a patch (1 pixel)
  // along each diagonal, in the order up-left, up-right, down-left, down-right.
  const int dy[5] = {0, -1, -1, 1, 1}, dx[5] = {0, -1, 1, -1, 1};
  int padding = 0;
  for (int b = 0; b < B; ++b)
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < 5; ++k)
        for (int c = 0; c < C; ++c)
          for (int py = 0; py < P; ++py)
            for (int px = 0; px < P; ++px) {
              const int y = n / G * P + py + dy[k], x = n % G * P + px + dx[k];
              const bool inside = y >= 0 && y < S && x >= 0 && x < S;
              const float want = inside ? img[size_t(((b * C + c) * S + y) * S + x)] : 0.0f;
              const float got = shifted[size_t((b * N + n) * len + ((k * C + c) * P + py) * P + px)];
              INFO("image " << b << " patch " << n << " copy " << k << " channel " << c);
              REQUIRE(got == want);
              padding += !inside;
            }
  // Each edge patch's outer row or column of one shift falls off the image; the first
  // copy is exactly the plain patch.
  CHECK(padding > 0);
  for (int b = 0; b < B; ++b)
    for (int n = 0; n < N; ++n)
      for (int i = 0; i < C * P * P; ++i)
        REQUIRE(shifted[size_t((b * N + n) * len + i)] == plain[size_t((b * N + n) * C * P * P + i)]);
}

TEST_CASE("token embedding backward matches finite differences", "[layers][patch][grad]") {
  const int B = 3, N = 4, D = 5, T = N + 1;
  auto proj = random_vector(B * N * D, 1.0f, 60), cls = random_vector(D, 1.0f, 61),
       pos = random_vector(T * D, 1.0f, 62), g = random_vector(B * T * D, 1.0f, 63);
  // dproj starts from other values: backward sets it (and adds into dcls and dpos)
  std::vector<float> tokens(B * T * D), dproj = random_vector(B * N * D, 1.0f, 59), dcls(D, 0.0f),
                                        dpos(T * D, 0.0f);
  auto f = [&] {
    embed_tokens_forward(tokens.data(), proj.data(), cls.data(), pos.data(), B, N, D);
    return dot(tokens.data(), g.data(), B * T * D);
  };
  f();
  CHECK(tokens[0] == Approx(cls[0] + pos[0]));
  CHECK(tokens[T * D + D + 1] == Approx(proj[N * D + 1] + pos[D + 1]));
  embed_tokens_backward(dproj.data(), dcls.data(), dpos.data(), g.data(), B, N, D);
  check_gradients(f, {{"patch_proj", proj.data(), dproj.data(), B * N * D},
                      {"cls", cls.data(), dcls.data(), D},
                      {"pos", pos.data(), dpos.data(), T * D}});
}

TEST_CASE("token embedding without position gradients still trains the CLS token",
          "[layers][patch][grad]") {
  const int B = 3, N = 4, D = 5, T = N + 1;
  auto proj = random_vector(B * N * D, 1.0f, 64), cls = random_vector(D, 1.0f, 65),
       pos = random_vector(T * D, 1.0f, 66), g = random_vector(B * T * D, 1.0f, 67);
  std::vector<float> tokens(B * T * D), dproj(B * N * D, 0.0f), dcls(D, 0.0f);
  const std::array<const float*, 2> position_tables = {pos.data(), nullptr};
  for (const float* positions : position_tables) {
    INFO((positions ? "fixed positions" : "no positions"));
    auto f = [&] {
      embed_tokens_forward(tokens.data(), proj.data(), cls.data(), positions, B, N, D);
      return dot(tokens.data(), g.data(), B * T * D);
    };
    f();
    CHECK(tokens[T * D + D + 1] == Approx(proj[N * D + 1] + (positions ? pos[D + 1] : 0.0f)));
    std::fill(dproj.begin(), dproj.end(), 0.0f);
    std::fill(dcls.begin(), dcls.end(), 0.0f);
    embed_tokens_backward(dproj.data(), dcls.data(), nullptr, g.data(), B, N, D);
    check_gradients(f, {{"patch_proj", proj.data(), dproj.data(), B * N * D},
                        {"cls", cls.data(), dcls.data(), D}});
  }
}

TEST_CASE("patch tokens without a CLS token: forward and backward", "[layers][patch][grad]") {
  const int B = 3, N = 4, D = 5;
  auto proj = random_vector(B * N * D, 1.0f, 68), pos = random_vector(N * D, 1.0f, 69),
       g = random_vector(B * N * D, 1.0f, 70);
  std::vector<float> tokens(B * N * D), dproj(B * N * D, 0.0f), dpos(N * D, 0.0f);
  auto with_pos = [&] {
    embed_tokens_forward(tokens.data(), proj.data(), nullptr, pos.data(), B, N, D);
    return dot(tokens.data(), g.data(), B * N * D);
  };
  with_pos();
  CHECK(tokens[N * D + 3] == proj[N * D + 3] + pos[3]);
  embed_patch_tokens_backward(dproj.data(), dpos.data(), g.data(), B, N, D);
  check_gradients(with_pos, {{"patch_proj", proj.data(), dproj.data(), B * N * D},
                             {"pos", pos.data(), dpos.data(), N * D}});
  // Without positions the tokens are the projections, and so are their gradients.
  embed_tokens_forward(tokens.data(), proj.data(), nullptr, nullptr, B, N, D);
  CHECK(tokens == proj);
  std::fill(dproj.begin(), dproj.end(), 7.0f);  // set, whatever it held
  embed_patch_tokens_backward(dproj.data(), nullptr, g.data(), B, N, D);
  CHECK(dproj == g);
  // In place, the gradient already in dpatch_proj: it stays, and the positions' sums read it.
  std::vector<float> in_place = g, dpos_in_place(N * D, 0.0f);
  std::fill(dpos.begin(), dpos.end(), 0.0f);
  embed_patch_tokens_backward(dproj.data(), dpos.data(), g.data(), B, N, D);
  embed_patch_tokens_backward(in_place.data(), dpos_in_place.data(), in_place.data(), B, N, D);
  CHECK(in_place == dproj);
  CHECK(dpos_in_place == dpos);
}

TEST_CASE("cross-entropy with soft targets: value and gradient", "[layers][loss][grad]") {
  const int B = 4, K = 5;
  auto logits = random_vector(B * K, 2.0f, 70);
  std::vector<float> targets(B * K), probs(B * K), dlogits(B * K, 0.0f);
  const int32_t labels[B] = {0, 3, 4, 1};
  make_targets(targets.data(), labels, B, K, 0.1f);
  for (int b = 0; b < B; ++b) {
    double s = 0;
    for (int k = 0; k < K; ++k) s += targets[b * K + k];
    CHECK(s == Approx(1.0));
    CHECK(targets[b * K + labels[b]] == Approx(0.9 + 0.1 / K));
  }
  // Against the definition: mean over the batch of -sum t log softmax(z).
  double expected = 0;
  for (int b = 0; b < B; ++b) {
    double z = 0;
    for (int k = 0; k < K; ++k) z += std::exp(double(logits[b * K + k]));
    for (int k = 0; k < K; ++k) expected -= targets[b * K + k] * (logits[b * K + k] - std::log(z));
  }
  CHECK(cross_entropy_forward(probs.data(), logits.data(), targets.data(), B, K) ==
        Approx(expected / B).epsilon(1e-5));
  auto f = [&] { return double(cross_entropy_forward(probs.data(), logits.data(), targets.data(), B, K)); };
  f();
  cross_entropy_backward(dlogits.data(), probs.data(), targets.data(), B, K);
  check_gradients(f, {{"logits", logits.data(), dlogits.data(), B * K}}, 1e-3, 2e-2, 1e-4);
}

TEST_CASE("cross-entropy stays finite for extreme logits", "[layers][loss]") {
  const float logits[3] = {1000.0f, -1000.0f, 0.0f};
  const float targets[3] = {0.0f, 1.0f, 0.0f};
  float probs[3];
  const float loss = cross_entropy_forward(probs, logits, targets, 1, 3);
  CHECK(std::isfinite(loss));
  CHECK(loss == Approx(2000.0f));
}
