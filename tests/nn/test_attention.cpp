// The attention core against its definition, for every score form (scaled_dot, dot,
// additive, cosine, lsa): forward against softmax(e) v computed in double, backward against
// central finite differences for qkv and the form's own parameters, for every head size
// compiled for (8, 16, 32, 64) and a run-time one, with and without attention dropout.
#include <catch2/catch.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
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

// A score form with parameters of its own, as a model layer holds them.
struct Score {
  AttentionForm form;
  std::vector<float> additive_v;   // (H, Dh)
  std::vector<float> logit_scale;  // (H)
  Score(AttentionForm f, int H, int Dh) : form(f) {
    additive_v = random_vector(H * Dh, 0.7f, 60);
    logit_scale = random_vector(H, 0.5f, 61);
    // about the initial temperatures: 10 for cosine, 1 / sqrt(Dh) for lsa's raw products
    const float centre = f == AttentionForm::lsa ? -0.5f * std::log(float(Dh)) : std::log(10.0f);
    for (float& s : logit_scale) s += centre;
  }
  AttentionScore view() const { return {form, additive_v.data(), logit_scale.data()}; }
};

const char* name_of(AttentionForm form) {
  switch (form) {
    case AttentionForm::scaled_dot: return "scaled_dot";
    case AttentionForm::dot: return "dot";
    case AttentionForm::additive: return "additive";
    case AttentionForm::cosine: return "cosine";
    case AttentionForm::lsa: return "lsa";
  }
  return "?";
}

constexpr AttentionForm kForms[] = {AttentionForm::scaled_dot, AttentionForm::dot,
                                    AttentionForm::additive, AttentionForm::cosine,
                                    AttentionForm::lsa};

// Head sizes 8, 16, 32 and 64 run code compiled for their size, others a run-time size:
// both are checked. The dot form's scores grow with Dh, so its inputs are scaled down to
// keep the softmax away from saturation, where finite differences say little.
void check_attention(AttentionForm form, float p, int B = 2, int T = 5, int D = 8, int H = 2) {
  INFO(name_of(form) << " p " << p << " B " << B << " T " << T << " D " << D << " H " << H);
  const int Dh = D / H;
  const float spread = form == AttentionForm::dot ? 1.0f / std::sqrt(std::sqrt(float(Dh))) : 1.0f;
  auto qkv = random_vector(B * T * 3 * D, spread, 40), g = random_vector(B * T * D, 1.0f, 41);
  std::vector<float> out(B * T * D), att(B * H * T * T), dqkv(B * T * 3 * D, 0.0f);
  std::vector<uint8_t> mask(B * H * T * T);
  Scratch scratch(T, Dh);
  Score score(form, H, Dh);
  auto f = [&] {
    attention_forward(out.data(), att.data(), mask.data(), qkv.data(), B, T, D, H, score.view(),
                      p, 77, scratch.rows.data(), scratch.slots);
    return dot(out.data(), g.data(), B * T * D);
  };
  f();
  for (int r = 0; r < B * H * T; ++r) {  // every attention row is a distribution
    double s = 0;
    for (int j = 0; j < T; ++j) s += att[r * T + j];
    CHECK(s == Approx(1.0).epsilon(1e-5));
  }
  // backward sets dqkv whatever it held, and adds into the score parameters' gradients:
  // start all of them from other values
  dqkv = random_vector(B * T * 3 * D, 1.0f, 42);
  std::vector<float> dv(H * Dh, 0.5f), dscale(H, 0.5f), pairs(attention_score_grad_floats(B, H, Dh));
  const AttentionScoreGrad dscore{dv.data(), dscale.data(), pairs.data()};
  attention_backward(dqkv.data(), dscore, g.data(), qkv.data(), att.data(), mask.data(), B, T, D,
                     H, score.view(), p, scratch.rows.data(), scratch.slots);
  for (float& x : dv) x -= 0.5f;
  for (float& x : dscale) x -= 0.5f;
  std::vector<GradTarget> targets = {{"qkv", qkv.data(), dqkv.data(), B * T * 3 * D}};
  if (form == AttentionForm::additive)
    targets.push_back({"additive_v", score.additive_v.data(), dv.data(), H * Dh});
  else
    for (float x : dv) REQUIRE(x == 0.0f);  // untouched by the other forms
  if (form == AttentionForm::cosine || form == AttentionForm::lsa)
    targets.push_back({"logit_scale", score.logit_scale.data(), dscale.data(), H});
  else
    for (float x : dscale) REQUIRE(x == 0.0f);
  // Normalising q and k divides their float rounding by |q| and |k| less than their
  // perturbation: the cosine form needs a larger step to rise above the noise. The additive
  // scores round once per term of their sum over Dh (a division each): at 64 tokens a step
  // of 1e-3 left differences of its central differences' noise (1e-3 to 2e-3, as large as
  // the tolerance) on elements that agree within 4e-4 at 5e-3.
  const double eps = form == AttentionForm::cosine    ? 1e-2
                     : form == AttentionForm::additive ? 5e-3
                                                       : 1e-3;
  check_gradients(f, targets, eps, 2e-2, 2e-3, 240);
}

// The scores of one head in double, straight from the definitions in attention.h.
double score_in_double(AttentionForm form, const std::vector<float>& qkv, const Score& score,
                       int D, int Dh, int h, int i, int j) {
  const float* q = qkv.data() + size_t(i) * 3 * D + h * Dh;
  const float* k = qkv.data() + size_t(j) * 3 * D + D + h * Dh;
  double qk = 0, qq = 0, kk = 0, additive = 0;
  for (int d = 0; d < Dh; ++d) {
    qk += double(q[d]) * k[d];
    qq += double(q[d]) * q[d];
    kk += double(k[d]) * k[d];
    additive += score.additive_v[size_t(h) * Dh + d] * std::tanh(double(q[d]) + k[d]);
  }
  switch (form) {
    case AttentionForm::scaled_dot: return qk / std::sqrt(double(Dh));
    case AttentionForm::dot: return qk;
    case AttentionForm::additive: return additive;
    case AttentionForm::cosine:
      return qk / std::max(std::sqrt(qq), 1e-12) / std::max(std::sqrt(kk), 1e-12) *
             std::exp(std::min(double(score.logit_scale[size_t(h)]), std::log(100.0)));
    case AttentionForm::lsa:
      if (i == j) return -std::numeric_limits<double>::infinity();
      return qk * std::exp(std::min(double(score.logit_scale[size_t(h)]), std::log(100.0)));
  }
  return 0;
}

void check_attention_forward(AttentionForm form, int T, int D, int H) {
  INFO(name_of(form) << " T " << T << " D " << D << " H " << H);
  const int B = 1, Dh = D / H;
  const float spread = form == AttentionForm::dot ? 1.0f / std::sqrt(std::sqrt(float(Dh))) : 1.0f;
  auto qkv = random_vector(T * 3 * D, spread, 50);
  std::vector<float> out(T * D), att(H * T * T);
  Scratch scratch(T, Dh);
  Score score(form, H, Dh);
  attention_forward(out.data(), att.data(), nullptr, qkv.data(), B, T, D, H, score.view(), 0.0f,
                    0, scratch.rows.data(), scratch.slots);
  // The cosine form's temperature (about 10) multiplies the float rounding of its scores;
  // an additive score sums Dh rounded tanh terms (or exps' quotients), so its rounding, which
  // the softmax passes on to the output, grows with the head (5e-6 measured at Dh 48).
  const double rel = form == AttentionForm::cosine ? 5e-5 : 1e-5;
  const double margin = form == AttentionForm::additive ? std::max(1e-6, 2e-7 * Dh) : 1e-6;
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < T; ++i) {
      std::vector<double> s(T);
      double top = -1e300, z = 0;
      for (int j = 0; j < T; ++j) top = std::max(top, s[j] = score_in_double(form, qkv, score, D, Dh, h, i, j));
      for (int j = 0; j < T; ++j) z += s[j] = std::exp(s[j] - top);
      for (int d = 0; d < Dh; ++d) {
        double o = 0;
        for (int j = 0; j < T; ++j) o += s[j] / z * qkv[j * 3 * D + 2 * D + h * Dh + d];
        CHECK(out[i * D + h * Dh + d] == Approx(o).epsilon(rel).margin(margin));
      }
      for (int j = 0; j < T; ++j)
        CHECK(att[(h * T + i) * T + j] == Approx(s[j] / z).epsilon(rel).margin(1e-7));
    }
}

}  // namespace

TEST_CASE("attention backward matches finite differences", "[layers][attention][grad]") {
  for (AttentionForm form : kForms) check_attention(form, 0.0f);
}

TEST_CASE("attention with dropout on the weights: backward matches finite differences",
          "[layers][attention][grad]") {
  for (AttentionForm form : kForms) check_attention(form, 0.3f);
}

TEST_CASE("attention with a compiled head size: backward matches finite differences",
          "[layers][attention][grad]") {
  for (AttentionForm form : kForms) {
    SECTION(std::string("Dh 8, ") + name_of(form)) {
      check_attention(form, 0.0f, 2, 6, 16, 2);
      check_attention(form, 0.25f, 2, 3, 16, 2);
    }
    SECTION(std::string("Dh 16, ") + name_of(form)) {
      check_attention(form, 0.0f, 1, 7, 32, 2);  // tokens not a multiple of the tile
      check_attention(form, 0.25f, 1, 7, 32, 2);
    }
    SECTION(std::string("Dh 24, ") + name_of(form)) {
      check_attention(form, 0.0f, 1, 9, 96, 4);  // head size not a whole vector
      check_attention(form, 0.25f, 1, 5, 48, 2);
    }
    SECTION(std::string("Dh 32, ") + name_of(form)) {
      check_attention(form, 0.0f, 1, 5, 64, 2);
      check_attention(form, 0.25f, 1, 17, 32, 1);  // one token past a whole tile
    }
    SECTION(std::string("Dh 48, ") + name_of(form)) {
      check_attention(form, 0.0f, 1, 6, 96, 2);
      check_attention(form, 0.25f, 1, 3, 48, 1);
    }
    SECTION(std::string("Dh 64, ") + name_of(form)) {
      check_attention(form, 0.0f, 1, 5, 128, 2);
      check_attention(form, 0.25f, 2, 4, 64, 1);
    }
  }
}

// Without attention dropout, AVX-512 builds keep a row's scores in registers from the
// product through the softmax (one to four vectors for up to 64 tokens); past 64 tokens the
// portable loops take over. Each count of vectors, and the edge, against the differences.
TEST_CASE("attention over 20, 40, 50, 64 and 65 tokens: backward matches finite differences",
          "[layers][attention][grad]") {
  for (AttentionForm form : kForms)
    for (int T : {20, 40, 50, 64, 65}) {
      SECTION(std::string(name_of(form)) + ", " + std::to_string(T) + " tokens") {
        check_attention(form, 0.0f, 1, T, 32, 2);
      }
    }
}

TEST_CASE("attention forward equals softmax(e) v per head, for every score form",
          "[layers][attention]") {
  for (AttentionForm form : kForms) {
    check_attention_forward(form, 3, 4, 2);    // run-time head size (Dh 2)
    check_attention_forward(form, 9, 16, 2);   // Dh 8
    check_attention_forward(form, 50, 64, 4);  // the default model's 50 tokens, Dh 16
    check_attention_forward(form, 33, 96, 4);  // Dh 24, one token past two tiles
    check_attention_forward(form, 13, 64, 2);  // Dh 32
    check_attention_forward(form, 16, 96, 2);  // Dh 48, tokens a whole tile
    check_attention_forward(form, 17, 64, 1);  // Dh 64
    check_attention_forward(form, 16, 80, 2);  // Dh 40: run-time, tokens a whole tile
  }
}

TEST_CASE("cosine and lsa attention: a temperature at its cap of 100 passes no gradient",
          "[layers][attention][grad]") {
  for (AttentionForm form : {AttentionForm::cosine, AttentionForm::lsa}) {
    INFO(name_of(form));
    const int B = 1, T = 4, D = 8, H = 2, Dh = 4;
    auto qkv = random_vector(B * T * 3 * D, 1.0f, 70), g = random_vector(B * T * D, 1.0f, 71);
    std::vector<float> out(B * T * D), att(B * H * T * T), dqkv(B * T * 3 * D, 0.0f);
    Scratch scratch(T, Dh);
    Score score(form, H, Dh);
    score.logit_scale = {5.0f, 1.0f};  // head 0 above ln 100 = 4.6, head 1 below
    if (form == AttentionForm::lsa) score.logit_scale[1] = -1.0f;  // keep the softmax soft
    attention_forward(out.data(), att.data(), nullptr, qkv.data(), B, T, D, H, score.view(),
                      0.0f, 0, scratch.rows.data(), scratch.slots);
    std::vector<float> dv(H * Dh), dscale(H, 0.0f), pairs(attention_score_grad_floats(B, H, Dh));
    attention_backward(dqkv.data(), {dv.data(), dscale.data(), pairs.data()}, g.data(),
                       qkv.data(), att.data(), nullptr, B, T, D, H, score.view(), 0.0f,
                       scratch.rows.data(), scratch.slots);
    CHECK(dscale[0] == 0.0f);
    CHECK(dscale[1] != 0.0f);
  }
}

// Locality self-attention masks each row's own token: no weight on it in either path (the
// register path's softmax leaves it exp(-87) / sum, as it leaves the padding), at every
// head size and token count the kernels take apart; a lone token still attends to itself.
TEST_CASE("lsa attention gives a token's own key no weight, and a lone token all of it",
          "[layers][attention]") {
  for (auto [T, D, H] : {std::tuple{5, 8, 2}, {7, 32, 2}, {50, 64, 4}, {64, 64, 4}, {65, 32, 2},
                         {49, 64, 2}, {9, 96, 4}})
    for (float p : {0.0f, 0.25f}) {
      INFO("T " << T << " D " << D << " H " << H << " p " << p);
      const int B = 2, Dh = D / H;
      auto qkv = random_vector(B * T * 3 * D, 1.0f, 90);
      std::vector<float> out(B * T * D), att(B * H * T * T);
      std::vector<uint8_t> mask(B * H * T * T);
      Scratch scratch(T, Dh);
      Score score(AttentionForm::lsa, H, Dh);
      attention_forward(out.data(), att.data(), mask.data(), qkv.data(), B, T, D, H,
                        score.view(), p, 5, scratch.rows.data(), scratch.slots);
      for (int bh = 0; bh < B * H; ++bh)
        for (int i = 0; i < T; ++i) {
          const float* row = att.data() + (int64_t(bh) * T + i) * T;
          CHECK(row[i] < 1e-30f);
          CHECK(*std::max_element(row, row + T) > 1.0f / float(T));
        }
    }
  const int D = 32, H = 2;
  auto qkv = random_vector(3 * D, 1.0f, 91);
  std::vector<float> out(D), att(H);
  Scratch scratch(1, D / H);
  Score score(AttentionForm::lsa, H, D / H);
  attention_forward(out.data(), att.data(), nullptr, qkv.data(), 1, 1, D, H, score.view(), 0.0f,
                    0, scratch.rows.data(), scratch.slots);
  for (int h = 0; h < H; ++h) CHECK(att[size_t(h)] == 1.0f);
  for (int d = 0; d < D; ++d) CHECK(out[size_t(d)] == Approx(qkv[size_t(2 * D + d)]));
}

TEST_CASE("unscaled dot scores saturate the softmax as the head grows; scaled ones do not",
          "[layers][attention]") {
  // At initialisation q and k have unit-variance entries: q . k has variance Dh, so without
  // the 1/sqrt(Dh) the largest weight of a row approaches 1 as Dh grows.
  const int T = 50, H = 1;
  double unscaled_before = 0;
  for (int Dh : {16, 64}) {
    auto qkv = random_vector(T * 3 * Dh, 1.0f, 80);
    std::vector<float> out(T * Dh), att(T * T);
    Scratch scratch(T, Dh);
    auto mean_max_weight = [&](AttentionForm form) {
      attention_forward(out.data(), att.data(), nullptr, qkv.data(), 1, T, Dh, H,
                        {form, nullptr, nullptr}, 0.0f, 0, scratch.rows.data(), scratch.slots);
      double sum = 0;
      for (int i = 0; i < T; ++i)
        sum += *std::max_element(att.begin() + i * T, att.begin() + (i + 1) * T);
      return sum / T;
    };
    const double scaled = mean_max_weight(AttentionForm::scaled_dot);
    const double unscaled = mean_max_weight(AttentionForm::dot);
    INFO("Dh " << Dh << ": mean largest weight " << scaled << " scaled, " << unscaled << " not");
    CHECK(scaled < 0.25);
    CHECK(unscaled > 0.5);
    CHECK(unscaled > unscaled_before);
    unscaled_before = unscaled;
  }
}

namespace {

// One forward and backward of the additive form, with dout = g: what each returns.
struct AdditiveRun {
  std::vector<float> out, att, dqkv, dv;
};

AdditiveRun run_additive(const std::vector<float>& qkv, const Score& score,
                         const std::vector<float>& g, int B, int T, int D, int H, float p) {
  const int Dh = D / H;
  AdditiveRun run{std::vector<float>(B * T * D), std::vector<float>(B * H * T * T),
                  std::vector<float>(B * T * 3 * D, 0.0f), std::vector<float>(H * Dh, 0.0f)};
  std::vector<uint8_t> mask(B * H * T * T);
  std::vector<float> pairs(attention_score_grad_floats(B, H, Dh));
  Scratch scratch(T, Dh);
  attention_forward(run.out.data(), run.att.data(), mask.data(), qkv.data(), B, T, D, H,
                    score.view(), p, 77, scratch.rows.data(), scratch.slots);
  attention_backward(run.dqkv.data(), {run.dv.data(), nullptr, pairs.data()}, g.data(),
                     qkv.data(), run.att.data(), mask.data(), B, T, D, H, score.view(), p,
                     scratch.rows.data(), scratch.slots);
  return run;
}

// max |a - b| / max |b| over two vectors: their difference against the values' scale.
double normwise_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(std::isfinite(a[i]));
    worst = std::max(worst, std::abs(double(a[i]) - b[i]));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return worst / scale;
}

// Adds `shift` to every q and takes it from every k of qkv (B, T, 3D).
void shift_queries_and_keys(std::vector<float>& qkv, int B, int T, int D, float shift) {
  for (int t = 0; t < B * T; ++t)
    for (int c = 0; c < D; ++c) {
      qkv[size_t(t) * 3 * D + c] += shift;
      qkv[size_t(t) * 3 * D + D + c] -= shift;
    }
}

// The scores from exps against the tanh path on the same scores: inputs on a grid of 2^-12
// within |x| < 8, so that q + 32 and k - 32 are exact and so is their sum, (q + 32) +
// (k - 32) = q + k. Shifted, every head is beyond kAdditiveExpBound and takes the tanh
// path, with the same tanh arguments: any difference is the exps' rounding (or a bug).
// Unshifted, |q| + |k| < 16 lets the AVX2 level share a division between two terms.
void check_additive_exps_against_tanh(int B, int T, int D, int H, float p) {
  INFO("p " << p << " B " << B << " T " << T << " D " << D << " H " << H);
  const int Dh = D / H;
  constexpr float kShift = 32.0f, kGrid = 4096.0f;
  static_assert(kShift - 8.0f > kAdditiveExpBound);
  auto qkv = random_vector(B * T * 3 * D, 1.5f, 90);
  for (float& x : qkv) x = std::clamp(std::round(x * kGrid) / kGrid, -7.9f, 7.9f);
  const auto g = random_vector(B * T * D, 1.0f, 91);
  Score score(AttentionForm::additive, H, Dh);
  const AdditiveRun fast = run_additive(qkv, score, g, B, T, D, H, p);
  shift_queries_and_keys(qkv, B, T, D, kShift);
  const AdditiveRun exact = run_additive(qkv, score, g, B, T, D, H, p);
  // Measured: every output and gradient within 7e-7 of the other path's largest value; a
  // wrong sign, factor or term is off by far more.
  CHECK(normwise_difference(fast.out, exact.out) < 2e-6);
  CHECK(normwise_difference(fast.att, exact.att) < 2e-6);
  CHECK(normwise_difference(fast.dqkv, exact.dqkv) < 2e-6);
  CHECK(normwise_difference(fast.dv, exact.dv) < 2e-6);
}

}  // namespace

TEST_CASE("additive attention from exps matches the tanh path to float rounding",
          "[layers][attention][additive]") {
  check_additive_exps_against_tanh(2, 50, 64, 4, 0.0f);   // the default model: Dh 16, 50 tokens
  check_additive_exps_against_tanh(2, 50, 64, 4, 0.25f);  // and with attention dropout
  check_additive_exps_against_tanh(1, 9, 16, 2, 0.0f);    // Dh 8
  check_additive_exps_against_tanh(1, 17, 64, 2, 0.0f);   // Dh 32, one token past a tile
  check_additive_exps_against_tanh(1, 50, 96, 4, 0.0f);   // Dh 24
  check_additive_exps_against_tanh(2, 4, 64, 1, 0.25f);   // Dh 64, fewer tokens than kRows
  check_additive_exps_against_tanh(1, 13, 128, 2, 0.0f);  // Dh 64
}

TEST_CASE("additive attention beyond the exps' bound: finite, and right in both passes",
          "[layers][attention][additive][grad]") {
  // Head 0 of each case is beyond kAdditiveExpBound (its e^2q e^2k would overflow or vanish)
  // and takes the tanh path, head 1 is at the bound and takes the exps: one call mixes them.
  // Head 1's |q| + |k| reaches 40, past kAdditivePairBound: a division for every term, where
  // the check against tanh (check_additive_exps_against_tanh) shares one between two.
  const int B = 1, T = 7, D = 32, H = 2, Dh = D / H;
  struct Case { const char* name; float q, k; };
  for (const Case c : {Case{"q near 30, k near -30", 30.0f, -30.0f},
                       Case{"q near -50, k near 50", -50.0f, 50.0f},
                       Case{"q near 30, k near -50: saturated", 30.0f, -50.0f}}) {
    INFO(c.name);
    auto qkv = random_vector(B * T * 3 * D, 1.0f, 92);
    const auto g = random_vector(B * T * D, 1.0f, 93);
    for (int t = 0; t < T; ++t)
      for (int d = 0; d < Dh; ++d) {
        qkv[t * 3 * D + d] += c.q;                            // head 0: q
        qkv[t * 3 * D + D + d] += c.k;                        // head 0: k
        float& q1 = qkv[t * 3 * D + Dh + d];                  // head 1: q and k at +-20
        float& k1 = qkv[t * 3 * D + D + Dh + d];
        q1 = std::clamp(q1 * 20.0f, -kAdditiveExpBound, kAdditiveExpBound);
        k1 = std::clamp(k1 * 20.0f, -kAdditiveExpBound, kAdditiveExpBound);
      }
    Score score(AttentionForm::additive, H, Dh);
    const AdditiveRun run = run_additive(qkv, score, g, B, T, D, H, 0.0f);
    for (const auto* values : {&run.out, &run.att, &run.dqkv, &run.dv})
      for (float x : *values) REQUIRE(std::isfinite(x));
    for (int h = 0; h < H; ++h)  // the weights against softmax(e) of the scores in double
      for (int i = 0; i < T; ++i) {
        std::vector<double> s(T);
        double top = -1e300, z = 0;
        for (int j = 0; j < T; ++j) {
          s[j] = score_in_double(AttentionForm::additive, qkv, score, D, Dh, h, i, j);
          top = std::max(top, s[j]);
        }
        for (int j = 0; j < T; ++j) z += s[j] = std::exp(s[j] - top);
        for (int j = 0; j < T; ++j)
          CHECK(run.att[(h * T + i) * T + j] == Approx(s[j] / z).epsilon(1e-5).margin(1e-6));
      }
    // Backward against finite differences: in the first two cases q + k is near 0 in head 0,
    // where tanh is far from saturated, and its gradients are of the usual size.
    std::vector<float> out(B * T * D), att(B * H * T * T);
    Scratch scratch(T, Dh);
    auto f = [&] {
      attention_forward(out.data(), att.data(), nullptr, qkv.data(), B, T, D, H, score.view(),
                        0.0f, 0, scratch.rows.data(), scratch.slots);
      return dot(out.data(), g.data(), B * T * D);
    };
    check_gradients(f, {{"qkv", qkv.data(), run.dqkv.data(), B * T * 3 * D},
                        {"additive_v", score.additive_v.data(), run.dv.data(), H * Dh}},
                    1e-2, 2e-2, 2e-3, 240);
  }
}

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include "../../src/nn/attention_short_tail.h"

namespace {

namespace level = attention_short_tail::level;
using attention_short_tail::kLanes;

// R rows of score_softmax_rows at V vectors a row, kt = K^T (kDh, Tp).
template <int kDh, int V, int R, bool kMaskOwn>
void whole_vector_rows(float* P, const float* q, const float* kt, int Tp, float scale, int T,
                       int diagonal) {
#if defined(__AVX512F__)
  (void)Tp;
  level::score_softmax_rows<kDh, V, R, kMaskOwn>(P, q, kDh, kt, scale, T, diagonal);
#else
  level::score_softmax_rows<kDh, V, R, kMaskOwn>(P, q, kDh, kt, Tp, scale, T, diagonal);
#endif
}

// Rows of T = kLanes (V - 1) + NT tokens through both register paths of the level
// (attention_avx512.h or attention_avx2.h): the whole last vector from the products, and the
// short tail from scores made for every row at once; with kMaskOwn, each row's own token
// masked as locality self-attention masks it, in a whole vector or in the tail. The second is
// only a cheaper way to the first's values: bit for bit.
template <int kDh, int V, int NT, int R = 4, bool kMaskOwn = false>
void check_short_tail(float spread) {
  constexpr int T = kLanes * (V - 1) + NT, Tp = (T + 15) / 16 * 16;  // padded_tokens
  INFO("Dh " << kDh << ", " << T << " tokens, " << R << " rows a call, own token masked "
             << kMaskOwn);
  static_assert(level::short_tail(T) == NT);
  const auto q = random_vector(T * kDh, spread, 70 + T), k = random_vector(T * kDh, spread, 71 + T);
  std::vector<float> kt(kDh * Tp, 0.0f), tail(2 * Tp);
  for (int j = 0; j < T; ++j)
    for (int d = 0; d < kDh; ++d) kt[d * Tp + j] = k[j * kDh + d];
  const float scale = 1.0f / std::sqrt(float(kDh));
  level::tail_scores<kDh, NT, kMaskOwn>(tail.data(), q.data(), kDh, kt.data(), T, Tp, scale);
  std::vector<float> whole(T * T), short_tail(T * T);
  int i = 0;
  for (; i + 4 <= T; i += 4)
    whole_vector_rows<kDh, V, 4, kMaskOwn>(whole.data() + i * T, q.data() + i * kDh, kt.data(),
                                           Tp, scale, T, i);
  for (; i < T; ++i)
    whole_vector_rows<kDh, V, 1, kMaskOwn>(whole.data() + i * T, q.data() + i * kDh, kt.data(),
                                           Tp, scale, T, i);
  for (i = 0; i + R <= T; i += R)
    level::score_softmax_rows_tail<kDh, V - 1, R, NT, kMaskOwn>(
        short_tail.data() + i * T, q.data() + i * kDh, kDh, kt.data(), scale, T,
        tail.data() + i, Tp, i);
  for (; i < T; ++i)
    level::score_softmax_rows_tail<kDh, V - 1, 1, NT, kMaskOwn>(
        short_tail.data() + i * T, q.data() + i * kDh, kDh, kt.data(), scale, T,
        tail.data() + i, Tp, i);
  for (int e = 0; e < T * T; ++e) {
    INFO("row " << e / T << ", token " << e % T);
    REQUIRE(short_tail[e] == whole[e]);
    if (kMaskOwn && e / T == e % T) REQUIRE(short_tail[e] < 1e-30f);
  }
}

#if !defined(__AVX512F__)
// check_short_tail for the additive form at the AVX2 level, from e^2q and e^2K^T as
// prepare_additive takes them (padding columns 1), a division a term or in pairs.
template <int kDh, int V, int NT, bool kInPairs>
void check_additive_short_tail(float spread) {
  constexpr int T = kLanes * (V - 1) + NT, Tp = (T + 15) / 16 * 16;  // padded_tokens
  constexpr int R = level::rows_per_call(V);
  INFO("Dh " << kDh << ", " << T << " tokens, pairs " << kInPairs);
  static_assert(level::short_tail(T) == NT);
  auto q = random_vector(T * kDh, spread, 80 + T), k = random_vector(T * kDh, spread, 81 + T);
  for (auto* x : {&q, &k})  // |q| + |k| within kAdditivePairBound, as Head::additive_pairs keeps it
    for (float& e : *x) e = std::clamp(e, -10.0f, 10.0f);
  const auto v = random_vector(kDh, 0.7f, 82);
  std::vector<float> exp_q(T * kDh), exp_kt(kDh * Tp, 1.0f), tail(2 * Tp);
  for (int j = 0; j < T; ++j)
    for (int d = 0; d < kDh; ++d) {
      exp_q[j * kDh + d] = std::exp(2.0f * q[j * kDh + d]);
      exp_kt[d * Tp + j] = std::exp(2.0f * k[j * kDh + d]);
    }
  level::additive_tail_scores<kDh, NT, kInPairs>(tail.data(), exp_q.data(), exp_kt.data(),
                                                 v.data(), T, Tp);
  std::vector<float> whole(T * T), short_tail(T * T);
  auto rows_of = [&](auto rows, int i) {
    level::additive_softmax_rows<kDh, V, rows(), kInPairs>(
        whole.data() + i * T, exp_q.data() + i * kDh, exp_kt.data(), Tp, v.data(), T);
    level::additive_softmax_rows_tail<kDh, V - 1, rows(), NT, kInPairs>(
        short_tail.data() + i * T, exp_q.data() + i * kDh, exp_kt.data(), Tp, v.data(), T,
        tail.data() + i);
  };
  int i = 0;
  for (; i + R <= T; i += R) rows_of(std::integral_constant<int, R>{}, i);
  for (; i < T; ++i) rows_of(std::integral_constant<int, 1>{}, i);
  for (int e = 0; e < T * T; ++e) {
    INFO("row " << e / T << ", token " << e % T);
    REQUIRE(short_tail[e] == whole[e]);
  }
}
#endif

}  // namespace

TEST_CASE("attention rows with one or two tokens in their last vector round as whole vectors",
          "[layers][attention]") {
  for (float spread : {1.0f, 4.0f}) {  // 4: scores tens apart, exps near the clamp
#if defined(__AVX512F__)
    check_short_tail<16, 4, 1, 7>(spread);  // the default model's 49 patches, 7 rows a call
    check_short_tail<16, 4, 2, 5>(spread);  // and its CLS token, 5 rows a call
    check_short_tail<16, 4, 1>(spread);
    check_short_tail<16, 4, 2, 8>(spread);
    check_short_tail<16, 2, 2, 6>(spread);  // 18 tokens, 6 rows a call
    check_short_tail<16, 2, 1>(spread);
    check_short_tail<32, 3, 2>(spread);
    check_short_tail<48, 2, 2>(spread);
    check_short_tail<64, 3, 1>(spread);
    check_short_tail<16, 4, 1, 7, true>(spread);  // lsa: the last own token in the tail
    check_short_tail<16, 4, 2, 5, true>(spread);
    check_short_tail<16, 2, 2, 6, true>(spread);
    check_short_tail<32, 3, 1, 4, true>(spread);
#else
    check_short_tail<16, 7, 1, 2>(spread);  // the default model's 49 patches, 2 rows a call
    check_short_tail<16, 7, 2, 2>(spread);  // and its CLS token
    check_short_tail<16, 7, 1>(spread);
    check_short_tail<16, 7, 2>(spread);
    check_short_tail<16, 3, 1>(spread);  // 17 tokens, 4 rows a call
    check_short_tail<16, 3, 2, 1>(spread);
    check_short_tail<8, 5, 1, 2>(spread);
    check_short_tail<24, 5, 2, 2>(spread);
    check_short_tail<32, 5, 2, 2>(spread);
    check_short_tail<48, 3, 2>(spread);
    check_short_tail<64, 5, 1, 2>(spread);
    check_short_tail<16, 7, 1, 2, true>(spread);  // lsa: the last own token in the tail
    check_short_tail<16, 7, 2, 2, true>(spread);
    check_short_tail<16, 3, 2, 4, true>(spread);
    check_short_tail<32, 5, 1, 2, true>(spread);
    check_additive_short_tail<16, 7, 1, true>(spread);  // additive, the default model's 49
    check_additive_short_tail<16, 7, 2, true>(spread);  // and 50 with the CLS token
    check_additive_short_tail<16, 7, 2, false>(spread);
    check_additive_short_tail<8, 3, 1, true>(spread);
    check_additive_short_tail<32, 5, 2, false>(spread);
#endif
  }
}
#endif
