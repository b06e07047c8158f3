#pragma once
// glibc's vector math library (libmvec) has SIMD versions of expf and erfcf accurate to a
// few ulps. Declaring them with the simd attribute lets the compiler call them from
// vectorised loops (as <math.h> does under -ffast-math, without fast-math's other changes),
// where plain libm calls would process one element at a time.
extern "C" {
float expf(float) noexcept __attribute__((simd("notinbranch")));
float erfcf(float) noexcept __attribute__((simd("notinbranch")));
}
