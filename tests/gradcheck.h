#pragma once
// Finite-difference gradient checking shared by the layer and model tests.
// A layer is checked through the scalar f = dot(output, g) for a fixed random g (dlib's
// test_layer): backward is run with dout = g, and each checked entry x_i of an input or
// parameter is compared with the central difference (f(x_i + eps) - f(x_i - eps)) / 2 eps.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "minivit/core/rng.h"

namespace minivit_test {

struct GradTarget {
  std::string name;
  float* value;       // perturbed in place (restored afterwards)
  const float* grad;  // analytic gradient, same length
  int64_t n;
};

inline void fill_random(float* x, int64_t n, float scale, uint64_t seed) {
  for (int64_t i = 0; i < n; ++i)
    x[i] = float(minivit::rng_normal(minivit::rng_key(seed, 99), uint64_t(i)) * scale);
}

inline std::vector<float> random_vector(int64_t n, float scale, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  fill_random(v.data(), n, scale, seed);
  return v;
}

// x rounded to the nearest bfloat16, ties to even, by its bits (finite x): the test side of
// the bf16 products (Precision::bf16).
inline float round_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

inline double dot(const float* a, const float* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * b[i];
  return s;
}

// Compares analytic and numerical gradients on up to `samples` entries per target (all
// entries when the tensor is small). Each entry must satisfy |num - ana| <= atol + rtol*|num|,
// and over a whole target the relative error norm must be below rtol.
inline void check_gradients(const std::function<double()>& f, const std::vector<GradTarget>& targets,
                            double eps = 1e-2, double rtol = 2e-2, double atol = 2e-3,
                            int samples = 40) {
  for (const GradTarget& t : targets) {
    const int64_t count = std::min<int64_t>(t.n, samples);
    double diff2 = 0.0, ref2 = 0.0;
    for (int64_t s = 0; s < count; ++s) {
      const int64_t i = t.n <= samples ? s : int64_t(minivit::rng_u64(777, uint64_t(s)) % uint64_t(t.n));
      const float saved = t.value[i];
      t.value[i] = saved + float(eps);
      const double up = f();
      t.value[i] = saved - float(eps);
      const double down = f();
      t.value[i] = saved;
      const double numerical = (up - down) / (2 * eps);
      const double analytic = t.grad[i];
      INFO(t.name << "[" << i << "]: analytic " << analytic << ", numerical " << numerical);
      CHECK(std::fabs(numerical - analytic) <= atol + rtol * std::fabs(numerical));
      diff2 += (numerical - analytic) * (numerical - analytic);
      ref2 += numerical * numerical;
    }
    INFO(t.name << ": relative error norm " << std::sqrt(diff2 / std::max(ref2, 1e-30)));
    CHECK(std::sqrt(diff2) <= rtol * std::sqrt(ref2) + atol);
  }
}

}  // namespace minivit_test
