#pragma once
// Inlined elementary functions for the vectorised loops of softmax and GELU. Written as
// plain arithmetic and selects, a loop of them compiles to whole vectors with no call per
// vector (glibc's libmvec expf and erfcf cost a call each and fall back to scalar code for
// lanes out of range; erfcf alone was 4-5% of a training step).

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN

// exp(x) for |x| <= 87 (beyond it the exponent bits built below overflow), inlined so that
// a loop of them vectorises without a call per vector (libmvec's call and its fallback to
// scalar code for lanes out of range cost more than the arithmetic on rows of 50). Cephes'
// method: x = n ln2 + r with |r| <= ln2/2, exp(r) by a degree-6 polynomial, times 2^n built
// in the exponent bits. Within 2 ulp of the exact value.
inline float exp_within_87(float x) {
  const float round_magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + round_magic) - round_magic;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // A NaN x gives a NaN p, and so a NaN result whatever the exponent; the max keeps its
  // conversion to int defined (a NaN fails the comparison), and leaves any other n alone.
  const int32_t exponent = (static_cast<int32_t>(std::max(-127.0f, n)) + 127) << 23;
  return p * std::bit_cast<float>(exponent);
}

// exp(x) for x <= 0, as softmax needs it after subtracting the row max. Below -87 it
// returns exp(-87) (about 1.6e-38) instead of an underflowing denormal, which vanishes next
// to the 1 that the row max contributes to a softmax sum.
inline float exp_nonpositive(float x) { return exp_within_87(std::max(x, -87.0f)); }

// erfc(z) for any z; for z < 0 as 2 - erfc(-z). The form is erfc(a) = t exp(-a^2 + P(t))
// with t = 1 / (1 + a / 2), as in Numerical Recipes' erfcc: the exp carries the Gaussian
// tail, so P stays smooth and the relative error stays small far out in the tail. P is a
// degree-9 fit, by iteratively reweighted least squares toward minimax, of
// log(erfc(a) / t) + a^2 on t in [0.17, 1], that is a in [0, 9.5] (beyond it erfc is below
// float's normal range); the fit is within 4e-8. In float the exp's argument, about -a^2,
// is rounded to half an ulp, which makes the error 1.2e-6 relative at worst for |z| <= 4
// and 4e-6 beyond (libm's erfcf: a few ulp). GELU's activations live well inside that.
inline float erfc_inline(float z) {
  const float a = std::abs(z);
  const float t = 1.0f / (1.0f + 0.5f * a);
  float p = 1.381054427e-01f;
  p = p * t - 6.435534626e-01f;
  p = p * t + 1.068795664e+00f;
  p = p * t - 5.789592506e-01f;
  p = p * t - 1.774483779e-01f;
  p = p * t + 5.294124147e-02f;
  p = p * t + 1.702380361e-02f;
  p = p * t + 3.903167319e-01f;
  p = p * t + 9.982052270e-01f;
  p = p * t - 1.265426977e+00f;
  // -a^2 + P(t) <= 0 up to rounding (erfc(a) <= t), which exp_nonpositive tolerates.
  const float e = t * exp_nonpositive(p - a * a);
  return z < 0.0f ? 2.0f - e : e;
}

// tanh(x) for any x, for the additive attention scores' T x T x Dh evaluations, inlined for
// the same reason as exp_nonpositive. Cephes' tanhf: below |x| = 0.625 an odd polynomial
// (where 1 - exp(-2|x|) would lose the low bits), above it (1 - e) / (1 + e) with
// e = exp(-2|x|) <= 1; both are computed and one is selected, so a loop stays in vectors.
inline float tanh_inline(float x) {
  const float a = std::abs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = x + x * z * p;
  const float e = exp_nonpositive(-2.0f * a);
  const float large = std::copysign((1.0f - e) / (1.0f + e), x);
  return a < 0.625f ? small : large;
}

// GELU, exact erf form, and its slope, through the erfc above: Phi(x) = 0.5 erfc(-x / sqrt 2)
// keeps full relative precision in the negative tail, where 1 + erf cancels. The layer
// (nn/gelu.cpp) and the product kernels' GELU epilogue (kernels/tile_epilogue.h) both take
// GELU from here, so fused or not, the bits are the same.
inline float gelu_inline(float x) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  return 0.5f * x * erfc_inline(-x * kInvSqrt2);
}

// gelu'(x) = Phi(x) + x phi(x)
inline float gelu_slope_inline(float x) {
  constexpr float kInvSqrt2 = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;
  const float cdf = 0.5f * erfc_inline(-x * kInvSqrt2);
  const float pdf = kInvSqrt2Pi * exp_nonpositive(-0.5f * x * x);
  return cdf + x * pdf;
}

// gelu_out[j] = GELU(x[j]), and x[j] becomes GELU's slope there, for j < n: the forward of a
// training step, which leaves backward only a product to take. Defined once, in
// src/kernels/gelu_and_slope.cpp (see there), for the layer and the product kernels' GELU
// epilogue alike: inlined into each of a kernel's tile shapes, the compiler contracted the
// slope's multiplies and adds differently from one shape to the next.
void gelu_and_slope(float* gelu_out, float* x, int n);

MINIVIT_ISA_END
}  // namespace minivit
