// The conv stem's 3x3 stride-2 convolution: gathering windows into rows and a linear layer
// over them against the convolution written out pixel by pixel, and the scatter as the
// gather's adjoint (so linear_backward plus scatter is the convolution's backward).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gradcheck.h"
#include "minivit/nn/conv3x3.h"
#include "minivit/nn/linear.h"
#include "level.h"

using namespace minivit;
using namespace minivit_test;

namespace {

// out (B, So, So, O) of a 3x3 convolution, stride 2, padding 1, PyTorch's weight layout
// (O, C, 3, 3), over inp (B, C, S, S), written out directly, in double.
std::vector<double> direct_conv(const std::vector<float>& inp, const std::vector<float>& weight,
                                const std::vector<float>& bias, int B, int C, int S, int O) {
  const int So = (S + 1) / 2;
  std::vector<double> out(size_t(B) * So * So * O);
  for (int b = 0; b < B; ++b)
    for (int oy = 0; oy < So; ++oy)
      for (int ox = 0; ox < So; ++ox)
        for (int o = 0; o < O; ++o) {
          double sum = bias[size_t(o)];
          for (int c = 0; c < C; ++c)
            for (int ky = 0; ky < 3; ++ky)
              for (int kx = 0; kx < 3; ++kx) {
                const int y = 2 * oy + ky - 1, x = 2 * ox + kx - 1;
                if (y < 0 || y >= S || x < 0 || x >= S) continue;
                sum += double(inp[size_t(((b * C + c) * S + y) * S + x)]) *
                       weight[size_t(((o * C + c) * 3 + ky) * 3 + kx)];
              }
          out[size_t(((b * So + oy) * So + ox) * O + o)] = sum;
        }
  return out;
}

// (B, C, S, S) as (B, S, S, C).
std::vector<float> channels_last(const std::vector<float>& inp, int B, int C, int S) {
  std::vector<float> out(inp.size());
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c)
      for (int p = 0; p < S * S; ++p)
        out[size_t((b * S * S + p) * C + c)] = inp[size_t((b * C + c) * S * S + p)];
  return out;
}

}  // namespace

TEST_CASE("gathered windows through a linear layer are the 3x3 stride-2 convolution",
          "[layers][conv]") {
  const int B = 2, C = 3, O = 4;
  for (int S : {8, 7, 2, 1}) {  // even and odd sides: an odd one's last window hangs over
    INFO("side " << S);
    const int So = conv3x3_s2_side(S);
    CHECK(So == (S + 1) / 2);
    const auto inp = random_vector(B * C * S * S, 1.0f, 10 + S);
    const auto weight = random_vector(O * C * 9, 1.0f, 20), bias = random_vector(O, 1.0f, 21);
    const auto want = direct_conv(inp, weight, bias, B, C, S, O);
    for (bool channels_first : {true, false}) {
      INFO("channels first " << channels_first);
      std::vector<float> rows(size_t(B) * So * So * 9 * C, -7.0f), out(want.size());
      conv3x3_s2_gather(rows.data(), channels_first ? inp.data() : channels_last(inp, B, C, S).data(),
                        B, C, S, channels_first);
      linear_forward(out.data(), rows.data(), weight.data(), bias.data(), B * So * So, 9 * C, O,
                     level_products());
      for (size_t i = 0; i < want.size(); ++i) REQUIRE(out[i] == Approx(want[i]).margin(1e-5));
    }
  }
}

// Each row, entry by entry, against the pixels of its window: at the sides and channel counts
// where AVX-512 builds move 16 entries at a time (channels first at sides of 32 and 64,
// channels last at 16 and 32 channels) and where they do not.
TEST_CASE("gathered rows hold each window's pixels in (channel, row, column) order, zero "
          "outside the image", "[layers][conv]") {
  struct Shape { bool channels_first; int C, S; };
  for (const Shape shape : {Shape{true, 3, 32}, {true, 1, 64}, {true, 2, 32}, {true, 3, 8},
                            {true, 3, 7}, {false, 16, 16}, {false, 32, 16}, {false, 32, 7},
                            {false, 16, 1}, {false, 3, 16}}) {
    const int B = 2, C = shape.C, S = shape.S, So = conv3x3_s2_side(S);
    INFO("channels first " << shape.channels_first << ", C " << C << ", side " << S);
    const auto inp = random_vector(B * C * S * S, 1.0f, 50 + C + S);
    auto pixel = [&](int b, int c, int y, int x) {
      if (y < 0 || y >= S || x < 0 || x >= S) return 0.0f;
      return shape.channels_first ? inp[size_t(((b * C + c) * S + y) * S + x)]
                                  : inp[size_t(((b * S + y) * S + x) * C + c)];
    };
    std::vector<float> want(size_t(B) * So * So * 9 * C), rows(want.size(), -7.0f);
    for (int b = 0; b < B; ++b)
      for (int p = 0; p < So * So; ++p)
        for (int c = 0; c < C; ++c)
          for (int t = 0; t < 9; ++t)
            want[(size_t(b * So * So + p) * C + c) * 9 + t] =
                pixel(b, c, 2 * (p / So) - 1 + t / 3, 2 * (p % So) - 1 + t % 3);
    conv3x3_s2_gather(rows.data(), inp.data(), B, C, S, shape.channels_first);
    CHECK(std::memcmp(rows.data(), want.data(), want.size() * sizeof(float)) == 0);
  }
}

// Patch dropout's gather: the kept positions' rows as the gather of every position has them,
// the dropped ones' zero (the rows start as NaN, so a row left unwritten fails), at the
// shapes of each path above.
TEST_CASE("a gather with a keep mask writes the kept positions' rows and zeros the others, or "
          "leaves them uncleared",
          "[layers][conv]") {
  struct Shape { bool channels_first; int C, S; };
  for (const Shape shape : {Shape{true, 3, 32}, {true, 3, 7}, {false, 32, 16}, {false, 3, 16},
                            {false, 16, 7}}) {
    const int B = 3, C = shape.C, S = shape.S, So = conv3x3_s2_side(S), row_len = 9 * C;
    INFO("channels first " << shape.channels_first << ", C " << C << ", side " << S);
    const auto inp = random_vector(B * C * S * S, 1.0f, 60 + C + S);
    std::vector<float> all(size_t(B) * So * So * row_len);
    conv3x3_s2_gather(all.data(), inp.data(), B, C, S, shape.channels_first);
    // Image 0 keeps every third position, image 1 none, image 2 all.
    std::vector<uint8_t> keep(size_t(B) * So * So);
    for (int p = 0; p < So * So; ++p) {
      keep[size_t(p)] = p % 3 == 0;
      keep[size_t(2 * So * So + p)] = 1;
    }
    std::vector<float> rows(all.size(), std::nanf(""));
    conv3x3_s2_gather(rows.data(), inp.data(), B, C, S, shape.channels_first, keep.data());
    for (size_t position = 0; position < keep.size(); ++position) {
      INFO("position " << position);
      const float* got = rows.data() + position * size_t(row_len);
      if (keep[position]) {
        REQUIRE(std::memcmp(got, all.data() + position * size_t(row_len),
                            size_t(row_len) * sizeof(float)) == 0);
      } else {
        REQUIRE(std::all_of(got, got + row_len, [](float v) { return v == 0.0f; }));
      }
    }
    // Not cleared, for a product that skips them: the kept rows the same, and each dropped
    // one untouched (NaN throughout) or its own window's row, nothing else.
    std::vector<float> uncleared(all.size(), std::nanf(""));
    conv3x3_s2_gather(uncleared.data(), inp.data(), B, C, S, shape.channels_first, keep.data(),
                      false);
    for (size_t position = 0; position < keep.size(); ++position) {
      INFO("position " << position << ", not cleared");
      const float* got = uncleared.data() + position * size_t(row_len);
      const bool own = std::memcmp(got, all.data() + position * size_t(row_len),
                                   size_t(row_len) * sizeof(float)) == 0;
      if (keep[position])
        REQUIRE(own);
      else
        REQUIRE((own || std::all_of(got, got + row_len, [](float v) { return std::isnan(v); })));
    }
  }
}

TEST_CASE("the windows read: each input position that a marked output's window covers",
          "[layers][conv]") {
  for (const int S : {7, 8, 16}) {
    const int B = 3, So = conv3x3_s2_side(S);
    INFO("side " << S);
    // Image 0 marks every fifth output, image 1 none, image 2 all.
    std::vector<uint8_t> outputs(size_t(B) * So * So, 0), read(size_t(B) * S * S, 7);
    for (int p = 0; p < So * So; ++p) {
      outputs[size_t(p)] = p % 5 == 0;
      outputs[size_t(2 * So * So + p)] = 1;
    }
    conv3x3_s2_windows_read(read.data(), outputs.data(), B, S);
    int marked = 0;
    for (int b = 0; b < B; ++b)
      for (int y = 0; y < S; ++y)
        for (int x = 0; x < S; ++x) {
          bool covered = false;
          for (int oy = 0; oy < So; ++oy)
            for (int ox = 0; ox < So; ++ox)
              covered |= outputs[size_t((b * So + oy) * So + ox)] && std::abs(y - 2 * oy) <= 1 &&
                         std::abs(x - 2 * ox) <= 1;
          const uint8_t got = read[size_t((b * S + y) * S + x)];
          INFO("image " << b << " (" << y << ", " << x << ")");
          REQUIRE(got == uint8_t(covered));
          marked += got;
        }
    // Every fifth output reads part of image 0 and not all of it; image 2 reads all of it.
    CHECK(marked > S * S);
    CHECK(marked < 2 * S * S);
  }
}

TEST_CASE("the scatter is the gather's adjoint: <gather x, y> = <x, scatter y>",
          "[layers][conv][grad]") {
  const int B = 3;
  for (int C : {5, 16, 32})  // 16 and 32: AVX-512 builds scatter 16 channels at a time
    for (int S : {6, 5}) {
      INFO("C " << C << ", side " << S);
      const int So = conv3x3_s2_side(S);
      const auto x = random_vector(B * S * S * C, 1.0f, 30), y = random_vector(B * So * So * 9 * C, 1.0f, 31);
      std::vector<float> gathered(y.size()), scattered(x.size(), 0.0f);
      conv3x3_s2_gather(gathered.data(), x.data(), B, C, S, false);
      conv3x3_s2_scatter(scattered.data(), y.data(), B, C, S);
      double lhs = 0, rhs = 0;
      for (size_t i = 0; i < y.size(); ++i) lhs += double(gathered[i]) * y[i];
      for (size_t i = 0; i < x.size(); ++i) rhs += double(x[i]) * scattered[i];
      CHECK(lhs == Approx(rhs).epsilon(1e-6));
      // Scatter adds: a second one doubles the result.
      const std::vector<float> once = scattered;
      conv3x3_s2_scatter(scattered.data(), y.data(), B, C, S);
      for (size_t i = 0; i < x.size(); ++i) REQUIRE(scattered[i] == Approx(2 * once[i]).margin(1e-6));
    }
}

// Every pixel's sum in the order of positions, then taps, then the sum before it: what the
// scatter adds, element by element.
std::vector<float> scatter_in_order(const std::vector<float>& drows, int B, int C, int S) {
  const int So = conv3x3_s2_side(S);
  std::vector<float> dinp(size_t(B) * S * S * C, 0.0f);
  for (int b = 0; b < B; ++b)
    for (int p = 0; p < So * So; ++p)
      for (int t = 0; t < 9; ++t) {
        const int y = 2 * (p / So) - 1 + t / 3, x = 2 * (p % So) - 1 + t % 3;
        if (y < 0 || y >= S || x < 0 || x >= S) continue;
        for (int c = 0; c < C; ++c)
          dinp[size_t(((b * S + y) * S + x) * C + c)] +=
              drows[(size_t(b * So * So + p) * C + c) * 9 + t];
      }
  return dinp;
}

TEST_CASE("the scatter sums each pixel's entries in position order, bit for bit",
          "[layers][conv]") {
  for (int C : {3, 16, 32})
    for (int S : {16, 7}) {
      INFO("C " << C << ", side " << S);
      const int B = 3, So = conv3x3_s2_side(S);
      const auto drows = random_vector(B * So * So * 9 * C, 1.0f, 60 + C + S);
      std::vector<float> dinp(size_t(B) * S * S * C, 0.0f);
      conv3x3_s2_scatter(dinp.data(), drows.data(), B, C, S);
      const auto want = scatter_in_order(drows, B, C, S);
      CHECK(std::memcmp(dinp.data(), want.data(), want.size() * sizeof(float)) == 0);
    }
}

TEST_CASE("the scatter from the kept positions' rows alone is the scatter of every row with "
          "the others zero, bit for bit", "[layers][conv]") {
  for (int C : {3, 32}) {
    INFO("C " << C);
    const int B = 17, S = 8, So = conv3x3_s2_side(S), R = So * So, kept = 7;
    const auto drows = random_vector(B * R * 9 * C, 1.0f, 32);
    std::vector<uint8_t> keep(size_t(B) * R, 0);
    for (int b = 0; b < B; ++b)
      for (int k = 0; k < kept; ++k) keep[size_t(b) * R + size_t((5 * k + b) % R)] = 1;
    std::vector<float> zeroed = drows, kept_rows;
    for (int i = 0; i < B * R; ++i) {
      float* row = zeroed.data() + size_t(i) * 9 * C;
      if (keep[size_t(i)])
        kept_rows.insert(kept_rows.end(), row, row + 9 * C);
      else
        std::fill(row, row + 9 * C, 0.0f);
    }
    REQUIRE(kept_rows.size() == size_t(B) * kept * 9 * C);
    std::vector<float> every(size_t(B) * S * S * C, 0.0f), from_kept = every;
    conv3x3_s2_scatter(every.data(), zeroed.data(), B, C, S);
    conv3x3_s2_scatter(from_kept.data(), kept_rows.data(), B, C, S, keep.data(), kept);
    CHECK(std::memcmp(every.data(), from_kept.data(), every.size() * sizeof(float)) == 0);
    CHECK(std::any_of(every.begin(), every.end(), [](float v) { return v != 0.0f; }));
  }
}

TEST_CASE("a 3x3 stride-2 convolution's input gradient matches finite differences",
          "[layers][conv][grad]") {
  const int B = 2, C = 2, S = 5, O = 3, So = conv3x3_s2_side(S), R = B * So * So;
  auto inp = random_vector(B * S * S * C, 1.0f, 40);
  const auto weight = random_vector(O * C * 9, 1.0f, 41), bias = random_vector(O, 1.0f, 42);
  const auto dout = random_vector(R * O, 1.0f, 43);
  std::vector<float> rows(size_t(R) * 9 * C), out(size_t(R) * O), drows(rows.size()), dinp(inp.size(), 0.0f);
  auto loss = [&] {
    conv3x3_s2_gather(rows.data(), inp.data(), B, C, S, false);
    linear_forward(out.data(), rows.data(), weight.data(), bias.data(), R, 9 * C, O,
                   level_products());
    double sum = 0;
    for (size_t i = 0; i < out.size(); ++i) sum += double(out[i]) * dout[i];
    return sum;
  };
  loss();
  linear_backward_input(drows.data(), dout.data(), weight.data(), R, 9 * C, O, false,
                        level_products());
  conv3x3_s2_scatter(dinp.data(), drows.data(), B, C, S);
  check_gradients(loss, {{"input", inp.data(), dinp.data(), int64_t(inp.size())}}, 1e-2, 1e-2, 1e-4, 100);
}
