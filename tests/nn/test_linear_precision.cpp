// train.precision = "bf16" in one linear layer: it rounds exactly the operands of each of
// its three products, at this level's kernels (where they have no bf16 products, nothing is
// rounded and the products run in fp32).
#include <catch2/catch.hpp>

#include <vector>

#include "gradcheck.h"
#include "level.h"
#include "minivit/nn/linear.h"

using namespace minivit;
using namespace minivit_test;

namespace {

// x as a bf16 product of this level takes it: rounded to bf16 where its kernels have bf16
// products, else itself.
float as_product_input(float x) {
  return level_products(Precision::bf16).precision == Precision::bf16 ? round_to_bf16(x) : x;
}

}  // namespace

TEST_CASE("a bf16 linear layer rounds the operands of each product and nothing else",
          "[layers][linear][precision]") {
  // out = x W^T + b from round(x), round(W); dx = round(g) round(W); dW = round(g)^T round(x);
  // db = 1^T g, unrounded. Each against a double sum of the same terms.
  const int R = 70, I = 40, O = 72;
  const auto x = random_vector(R * I, 1.0f, 31), W = random_vector(O * I, 0.5f, 32);
  const auto b = random_vector(O, 0.5f, 33), g = random_vector(R * O, 1.0f, 34);
  std::vector<float> out(R * O), dx(R * I, 0.0f), dW(O * I, 0.0f), db(O, 0.0f);
  linear_forward(out.data(), x.data(), W.data(), b.data(), R, I, O, level_products(Precision::bf16));
  linear_backward_input(dx.data(), g.data(), W.data(), R, I, O, true,
                        level_products(Precision::bf16));
  for (int piece = 0; piece < linear_param_pieces(I, O); ++piece)
    linear_backward_params(dW.data(), db.data(), g.data(), x.data(), R, I, O, piece,
                           level_products(Precision::bf16));
  auto r = [](const std::vector<float>& v, int i) { return double(as_product_input(v[size_t(i)])); };
  const double tolerance = 1e-5;
  for (int i = 0; i < R; ++i)
    for (int o = 0; o < O; ++o) {
      double sum = b[size_t(o)];
      for (int k = 0; k < I; ++k) sum += r(x, i * I + k) * r(W, o * I + k);
      REQUIRE(out[size_t(i * O + o)] == Approx(sum).margin(tolerance));
    }
  for (int i = 0; i < R; ++i)
    for (int k = 0; k < I; ++k) {
      double sum = 0.0;
      for (int o = 0; o < O; ++o) sum += r(g, i * O + o) * r(W, o * I + k);
      REQUIRE(dx[size_t(i * I + k)] == Approx(sum).margin(tolerance));
    }
  for (int o = 0; o < O; ++o) {
    double bias_sum = 0.0;
    for (int i = 0; i < R; ++i) bias_sum += g[size_t(i * O + o)];
    REQUIRE(db[size_t(o)] == Approx(bias_sum).margin(tolerance));
    for (int k = 0; k < I; ++k) {
      double sum = 0.0;
      for (int i = 0; i < R; ++i) sum += r(g, i * O + o) * r(x, i * I + k);
      REQUIRE(dW[size_t(o * I + k)] == Approx(sum).margin(tolerance));
    }
  }
}

