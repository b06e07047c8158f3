#pragma once
// glibc's vector math library (libmvec) has SIMD versions of expf and erfcf accurate to a
// few ulps. Declaring them with the simd attribute lets the compiler call them from
// vectorised loops (as <math.h> does under -ffast-math, without fast-math's other changes),
// where plain libm calls would process one element at a time.
extern "C" {
float expf(float) noexcept __attribute__((simd("notinbranch")));
float erfcf(float) noexcept __attribute__((simd("notinbranch")));
}

#include <algorithm>
#include <bit>
#include <cstdint>

namespace minivit {

// exp(x) for x <= 0, as softmax needs it after subtracting the row max, inlined so that a
// loop of them vectorises without a call per vector (libmvec's call and its fallback to
// scalar code for lanes out of range cost more than the arithmetic on rows of 50). Cephes'
// method: x = n ln2 + r with |r| <= ln2/2, exp(r) by a degree-6 polynomial, times 2^n built
// in the exponent bits. Within 2 ulp of the exact value; below -87 it returns exp(-87)
// (about 1.6e-38) instead of an underflowing denormal, which vanishes next to the 1 that
// the row max contributes to a softmax sum.
inline float exp_nonpositive(float x) {
  x = std::max(x, -87.0f);
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
  const int32_t exponent = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(exponent);
}

}  // namespace minivit
