#pragma once
// Counter-based random numbers: every random draw is a pure function of (seed, purpose,
// step, index). Dropout masks and data order therefore do not depend on the thread count or
// on how work is split, and resuming needs no generator state beyond the step counter.
#include <cmath>
#include <cstdint>

namespace minivit {

inline uint64_t mix64(uint64_t x) {  // splitmix64 finaliser: a strong 64-bit bijection
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A stream key for one purpose at one point of training.
inline uint64_t rng_key(uint64_t seed, uint64_t purpose, uint64_t a = 0, uint64_t b = 0) {
  return mix64(mix64(mix64(seed ^ mix64(purpose)) ^ a) ^ b);
}

inline uint64_t rng_u64(uint64_t key, uint64_t index) { return mix64(key ^ mix64(index)); }

// Uniform in [0, 1) with 24 random bits (exactly representable as float).
inline float rng_uniform(uint64_t key, uint64_t index) {
  return float(rng_u64(key, index) >> 40) * 0x1.0p-24f;
}

// Standard normal by Box-Muller from two independent uniforms.
inline double rng_normal(uint64_t key, uint64_t index) {
  const double u1 = (double(rng_u64(key, 2 * index) >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  const double u2 = double(rng_u64(key, 2 * index + 1) >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// Purposes, so that streams for different uses never coincide.
enum RngPurpose : uint64_t {
  kRngInit = 1,
  kRngDataOrder = 2,
  kRngDropout = 3,
  kRngValSplit = 4,
  kRngAugment = 5,
};

}  // namespace minivit
