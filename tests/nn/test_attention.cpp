// The attention core against its definition: forward against softmax(q k^T / sqrt(Dh)) v
// computed in double, backward against central finite differences, for every head size
// compiled for (8, 16, 32, 64) and a run-time one, with and without attention dropout.
#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>
#include <vector>

#include "gradcheck.h"
#include "minivit/nn/attention.h"

using namespace minivit;
using namespace minivit_test;

namespace {

// Scratch for the attention core, one row per thread of the pool, as Activations holds it.
struct Scratch {
  int slots;
  std::vector<float> rows;
  Scratch(int T, int Dh)
      : slots(omp_get_max_threads()), rows(size_t(slots * attention_scratch_floats(T, Dh))) {}
};

// Head sizes 8, 16, 32 and 64 run code compiled for their size, others a run-time size:
// both are checked.
void check_attention(float p, int B = 2, int T = 5, int D = 8, int H = 2) {
  auto qkv = random_vector(B * T * 3 * D, 1.0f, 40), g = random_vector(B * T * D, 1.0f, 41);
  std::vector<float> out(B * T * D), att(B * H * T * T), dqkv(B * T * 3 * D, 0.0f);
  std::vector<uint8_t> mask(B * H * T * T);
  Scratch scratch(T, D / H);
  auto f = [&] {
    attention_forward(out.data(), att.data(), mask.data(), qkv.data(), B, T, D, H, p, 77,
                      scratch.rows.data(), scratch.slots);
    return dot(out.data(), g.data(), B * T * D);
  };
  f();
  for (int r = 0; r < B * H * T; ++r) {  // every attention row is a distribution
    double s = 0;
    for (int j = 0; j < T; ++j) s += att[r * T + j];
    CHECK(s == Approx(1.0).epsilon(1e-5));
  }
  // backward adds into dqkv: start from other values and take them off again
  const auto before = random_vector(B * T * 3 * D, 1.0f, 42);
  dqkv = before;
  attention_backward(dqkv.data(), g.data(), qkv.data(), att.data(), mask.data(), B, T, D, H, p,
                     scratch.rows.data(), scratch.slots);
  for (size_t i = 0; i < dqkv.size(); ++i) dqkv[i] -= before[i];
  check_gradients(f, {{"qkv", qkv.data(), dqkv.data(), B * T * 3 * D}}, 1e-3, 2e-2, 2e-3, 240);
}

void check_attention_forward(int T, int D, int H) {
  const int B = 1, Dh = D / H;
  auto qkv = random_vector(T * 3 * D, 1.0f, 50);
  std::vector<float> out(T * D), att(H * T * T);
  Scratch scratch(T, Dh);
  attention_forward(out.data(), att.data(), nullptr, qkv.data(), B, T, D, H, 0.0f, 0,
                    scratch.rows.data(), scratch.slots);
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < T; ++i) {
      std::vector<double> s(T);
      double z = 0;
      for (int j = 0; j < T; ++j) {
        s[j] = 0;
        for (int d = 0; d < Dh; ++d)
          s[j] += qkv[i * 3 * D + h * Dh + d] * qkv[j * 3 * D + D + h * Dh + d];
        s[j] = std::exp(s[j] / std::sqrt(double(Dh)));
        z += s[j];
      }
      for (int d = 0; d < Dh; ++d) {
        double o = 0;
        for (int j = 0; j < T; ++j) o += s[j] / z * qkv[j * 3 * D + 2 * D + h * Dh + d];
        CHECK(out[i * D + h * Dh + d] == Approx(o).epsilon(1e-5).margin(1e-6));
      }
      for (int j = 0; j < T; ++j)
        CHECK(att[(h * T + i) * T + j] == Approx(s[j] / z).epsilon(1e-5).margin(1e-7));
    }
}

}  // namespace

TEST_CASE("attention backward matches finite differences", "[layers][attention][grad]") {
  check_attention(0.0f);
}

TEST_CASE("attention with dropout on the weights: backward matches finite differences",
          "[layers][attention][grad]") {
  check_attention(0.3f);
}

TEST_CASE("attention with a compiled head size: backward matches finite differences",
          "[layers][attention][grad]") {
  SECTION("Dh 8") {
    check_attention(0.0f, 2, 6, 16, 2);
    check_attention(0.25f, 2, 3, 16, 2);
  }
  SECTION("Dh 16") {
    check_attention(0.0f, 1, 7, 32, 2);  // tokens not a multiple of the tile
    check_attention(0.25f, 1, 7, 32, 2);
  }
  SECTION("Dh 32") {
    check_attention(0.0f, 1, 5, 64, 2);
    check_attention(0.25f, 1, 17, 32, 1);  // one token past a whole tile
  }
  SECTION("Dh 64") {
    check_attention(0.0f, 1, 5, 128, 2);
    check_attention(0.25f, 2, 4, 64, 1);
  }
}

TEST_CASE("attention forward equals softmax(q k^T / sqrt(Dh)) v per head", "[layers][attention]") {
  check_attention_forward(3, 4, 2);    // run-time head size (Dh 2)
  check_attention_forward(9, 16, 2);   // Dh 8
  check_attention_forward(50, 64, 4);  // the default model's 50 tokens, Dh 16
  check_attention_forward(13, 64, 2);  // Dh 32
  check_attention_forward(17, 64, 1);  // Dh 64
  check_attention_forward(16, 96, 2);  // Dh 48: run-time, tokens a whole tile
}

