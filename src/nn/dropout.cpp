#include "minivit/nn/dropout.h"

#include "minivit/core/rng.h"
#include "minivit/kernels/threads.h"

namespace minivit {
MINIVIT_ISA_BEGIN

bool dropout_keep(uint64_t key, int64_t index, float p) {
  return rng_uniform(key, uint64_t(index)) >= p;
}

void dropout_forward(float* out, uint8_t* mask, const float* inp, int64_t n, float p,
                     uint64_t key, int64_t first_index) {
  if (p <= 0.0f) {
    if (out != inp)
      for (int64_t i = 0; i < n; ++i) out[i] = inp[i];
    return;
  }
  const float scale = 1.0f / (1.0f - p);
  for_ranges(n, n > 65536, [&](int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const bool keep = dropout_keep(key, first_index + i, p);
    mask[i] = keep;
    out[i] = keep ? inp[i] * scale : 0.0f;
  }
  });
}

void dropout_backward(float* dinp, const float* dout, const uint8_t* mask, int64_t n, float p,
                      bool add_into) {
  const float scale = p <= 0.0f ? 1.0f : 1.0f / (1.0f - p);
  auto term = [&](int64_t i) { return p <= 0.0f ? dout[i] : mask[i] ? dout[i] * scale : 0.0f; };
  for_ranges(n, p > 0.0f && n > 65536, [&](int64_t begin, int64_t end) {
    if (add_into)
      for (int64_t i = begin; i < end; ++i) dinp[i] += term(i);
    else
      for (int64_t i = begin; i < end; ++i) dinp[i] = 0.0f + term(i);
  });
}

MINIVIT_ISA_END
}  // namespace minivit
