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

// Cephes' expf steps, shared by exp_within_87 below and the attention core's copies of it
// in vectors (src/nn/attention_avx512.h, attention_avx2.h), so that all compute one function.
namespace expf_steps {
constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2High = 0.693359375f, kLn2Low = 2.12194440e-4f;  // ln2 in two parts
constexpr int kTerms = 6;  // the polynomial's coefficients, highest degree first
constexpr float kPolynomial[kTerms] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                       4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
}  // namespace expf_steps

// exp(x) for |x| <= 87 (beyond it the exponent bits built below overflow), inlined so that
// a loop of them vectorises without a call per vector (libmvec's call and its fallback to
// scalar code for lanes out of range cost more than the arithmetic on rows of 50). Cephes'
// method: x = n ln2 + r with |r| <= ln2/2, exp(r) by a degree-6 polynomial, times 2^n built
// in the exponent bits. Within 2 ulp of the exact value.
inline float exp_within_87(float x) {
  using namespace expf_steps;
  const float n = (x * kLog2e + kRoundMagic) - kRoundMagic;
  const float r = (x - n * kLn2High) + n * kLn2Low;
  float p = kPolynomial[0];
  for (int i = 1; i < kTerms; ++i) p = p * r + kPolynomial[i];
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

// exp(-z^2), the Gaussian factor of erfc_inline's tail; GELU's slope takes the normal
// density from it. Written once, so that where both are inlined on the same z the compiler
// computes the exp once.
inline float gaussian_inline(float z) {
  const float a = std::abs(z);
  return exp_nonpositive(-(a * a));
}

// erfc(z) for any z; for z < 0 as 2 - erfc(-z). The form is erfc(a) = t Q(t) exp(-a^2)
// with t = 1 / (1 + a / 2), as in Abramowitz and Stegun's 7.1.26: the exp carries the
// Gaussian tail, so Q (erfc(a) exp(a^2) / t, which falls smoothly from 1 at a = 0 toward
// 1 / (2 sqrt pi)) stays a polynomial and the relative error stays small far out in the
// tail. Q is a degree-8 fit, by iteratively reweighted least squares toward minimax in
// relative error, on t in [0.174, 1], that is a in [0, 9.5] (beyond it erfc is below
// float's normal range); with its coefficients rounded to float the fit is within 6.5e-8.
// In float, a^2 is rounded to half an ulp, which is the error's main part: 7.5e-7 relative
// at worst for |z| <= 4 and 4e-6 beyond (up to 85, half an ulp of a^2 is 3.8e-6 of the
// exponent and so of the result), with or without fused multiply-adds (libm's erfcf: a few
// ulp). GELU's activations live well inside that.
inline float erfc_inline(float z) {
  const float a = std::abs(z);
  const float t = 1.0f / (1.0f + 0.5f * a);
  float q = -5.889091268e-02f;
  q = q * t + 2.837025821e-01f;
  q = q * t - 4.853849113e-01f;
  q = q * t + 2.759793997e-01f;
  q = q * t - 2.517844178e-02f;
  q = q * t + 2.020701170e-01f;
  q = q * t + 2.432609499e-01f;
  q = q * t + 2.823534906e-01f;
  q = q * t + 2.820876837e-01f;
  const float e = t * q * gaussian_inline(z);
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

// gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-(x / sqrt 2)^2) / sqrt(2 pi): the same
// Gaussian factor as Phi's erfc, so that a pass taking both GELU and its slope computes one
// exp an element, not two.
inline float gelu_slope_inline(float x) {
  constexpr float kInvSqrt2 = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;
  const float z = -x * kInvSqrt2;
  const float cdf = 0.5f * erfc_inline(z);
  const float pdf = kInvSqrt2Pi * gaussian_inline(z);
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
