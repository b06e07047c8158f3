// The inlined elementary functions of vecmath.h against the C library's, in double, over
// the ranges the layers evaluate them on.
#include <catch2/catch.hpp>

#include <xmmintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "minivit/kernels/vecmath.h"

using namespace minivit;

namespace {

// The thread pool turns on flush-to-zero for the threads that train (threads.h); a test
// that ran before this one in the same process may have left it on in this thread. The
// tail checks below measure the functions themselves, in IEEE arithmetic.
struct IeeeDenormals {
  unsigned saved = _mm_getcsr();
  IeeeDenormals() { _mm_setcsr(saved & ~0x8040u); }  // FTZ (bit 15) and DAZ (bit 6) off
  ~IeeeDenormals() { _mm_setcsr(saved); }
};

}  // namespace

TEST_CASE("exp_nonpositive is within 2 ulp of exp on the range softmax uses", "[vecmath]") {
  double worst = 0.0;
  for (int i = 0; i <= 870000; ++i) {  // -87 .. 0 in steps of 1e-4, both ends included
    const float x = -float(i) * 1e-4f;
    const double exact = std::exp(double(x));
    const double ulp = std::ldexp(1.0, std::ilogb(exact) - 23);
    worst = std::max(worst, std::abs(double(exp_nonpositive(x)) - exact) / ulp);
  }
  CHECK(worst <= 2.0);
  CHECK(exp_nonpositive(0.0f) == 1.0f);
  // Far below the range it stays a tiny normal number, never a NaN, inf or denormal.
  for (float x : {-87.5f, -100.0f, -1e30f, -INFINITY}) {
    const float y = exp_nonpositive(x);
    CHECK(y > 0.0f);
    CHECK(y < 2e-38f);
    CHECK(std::isnormal(y));
  }
}

TEST_CASE("exp_within_87 is within 2 ulp of exp on both sides of 0", "[vecmath]") {
  // Additive attention takes e^2q and e^2k for |q|, |k| up to 20 (attention.h): |x| <= 40
  // there, checked out to 87.
  const IeeeDenormals ieee;
  double worst = 0.0;
  for (int i = -870000; i <= 870000; ++i) {  // -87 .. 87 in steps of 1e-4
    const float x = float(i) * 1e-4f;
    const double exact = std::exp(double(x));
    const double ulp = std::ldexp(1.0, std::ilogb(exact) - 23);
    worst = std::max(worst, std::abs(double(exp_within_87(x)) - exact) / ulp);
  }
  INFO("worst " << worst << " ulp");
  CHECK(worst <= 2.0);
  CHECK(exp_within_87(0.0f) == 1.0f);
  CHECK(std::isfinite(exp_within_87(87.0f)));
  CHECK(std::isnormal(exp_within_87(-87.0f)));
}

// A checkpoint whose weights make a NaN (fuzz/regressions/checkpoint/nan_through_gelu) sends
// NaN into GELU: the NaN comes out, and under the sanitizers no NaN is converted to int.
TEST_CASE("exp_within_87, exp_nonpositive and GELU pass a NaN through", "[vecmath]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(exp_within_87(nan)));
  CHECK(std::isnan(exp_nonpositive(nan)));
  CHECK(std::isnan(gelu_inline(nan)));
  CHECK(std::isnan(gelu_slope_inline(nan)));
}

TEST_CASE("erfc_inline is close to erfc in relative terms on both sides and in the tail",
          "[vecmath]") {
  // Where GELU evaluates it, erfc(-x / sqrt 2) for |x| up to 13: relative error against the
  // double erfc of the same float argument, so the error of rounding the argument (which
  // any float erfc carries) is left out.
  const IeeeDenormals ieee;
  double worst_core = 0.0, worst_tail = 0.0;
  for (int i = -920000; i <= 920000; ++i) {  // z in [-9.2, 9.2] in steps of 1e-5
    const float z = float(i) * 1e-5f;
    const double exact = std::erfc(double(z));
    const double rel = std::abs(double(erfc_inline(z)) / exact - 1.0);
    double& worst = std::abs(z) <= 4.0f ? worst_core : worst_tail;
    worst = std::max(worst, rel);
  }
  // Measured 7.5e-7 in the core and 4.0e-6 in the tail, fused multiply-adds or not: half an
  // ulp of a^2 (up to 85) is 3.8e-6 of the exponent and so of the result.
  CHECK(worst_core < 1e-6);
  CHECK(worst_tail < 5e-6);
  CHECK(erfc_inline(0.0f) == Approx(1.0).epsilon(2e-7));
  CHECK(erfc_inline(-9.0f) == 2.0f);
  CHECK(erfc_inline(INFINITY) >= 0.0f);
  CHECK(erfc_inline(INFINITY) < 1e-37f);
  CHECK(erfc_inline(-INFINITY) == 2.0f);
  CHECK(std::isnan(erfc_inline(NAN)));  // a diverged activation stays visible
}

TEST_CASE("tanh_inline is within a few ulp of tanh, odd, and saturates cleanly", "[vecmath]") {
  // Additive attention evaluates it on sums of query and key entries: |x| up to 20 here.
  double worst = 0.0;
  for (int i = -2000000; i <= 2000000; ++i) {  // x in [-20, 20] in steps of 1e-5
    const float x = float(i) * 1e-5f;
    const double exact = std::tanh(double(x));
    if (exact == 0.0) continue;
    const double ulp = std::ldexp(1.0, std::ilogb(exact) - 23);
    worst = std::max(worst, std::abs(double(tanh_inline(x)) - exact) / ulp);
  }
  INFO("worst " << worst << " ulp");
  CHECK(worst <= 4.0);
  CHECK(tanh_inline(0.0f) == 0.0f);
  for (float x : {1e-8f, 0.3f, 0.625f, 2.0f, 9.0f}) CHECK(tanh_inline(-x) == -tanh_inline(x));
  for (float x : {30.0f, 100.0f, 1e30f, INFINITY}) CHECK(tanh_inline(x) == 1.0f);
}
