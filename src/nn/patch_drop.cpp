#include "minivit/nn/patch_drop.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "minivit/core/rng.h"

namespace minivit {

void patch_drop_draw(uint8_t* keep, int n, int N, int kept, uint64_t key, int64_t first_image) {
  std::vector<std::pair<float, int>> draws(static_cast<size_t>(N));
  for (int b = 0; b < n; ++b) {
    const uint64_t first = uint64_t(first_image + b) * uint64_t(N);
    for (int i = 0; i < N; ++i) draws[size_t(i)] = {rng_uniform(key, first + uint64_t(i)), i};
    // The pairs compare by draw, then by index: the same subset on every machine.
    std::nth_element(draws.begin(), draws.begin() + (kept - 1), draws.end());
    uint8_t* row = keep + int64_t(b) * N;
    std::fill_n(row, N, uint8_t(0));
    for (int i = 0; i < kept; ++i) row[draws[size_t(i)].second] = 1;
  }
}

void patch_drop_forward(float* out, const float* tokens, const uint8_t* keep, int n, int prefix,
                        int N, int kept, int D) {
  for (int b = 0; b < n; ++b) {
    const float* src = tokens + int64_t(b) * (prefix + N) * D;
    float* dst = out + int64_t(b) * (prefix + kept) * D;
    std::copy_n(src, int64_t(prefix) * D, dst);
    dst += int64_t(prefix) * D;
    const uint8_t* row = keep + int64_t(b) * N;
    for (int i = 0; i < N; ++i)
      if (row[i]) {
        std::copy_n(src + int64_t(prefix + i) * D, D, dst);
        dst += D;
      }
  }
}

void patch_drop_backward(float* dtokens, const float* dout, const uint8_t* keep, int n,
                         int prefix, int N, int kept, int D) {
  for (int b = 0; b < n; ++b) {
    float* dst = dtokens + int64_t(b) * (prefix + N) * D;
    const float* src = dout + int64_t(b) * (prefix + kept) * D;
    auto add_row = [D](float* d, const float* s) {
#pragma omp simd
      for (int j = 0; j < D; ++j) d[j] += s[j];
    };
    for (int r = 0; r < prefix; ++r) add_row(dst + int64_t(r) * D, src + int64_t(r) * D);
    src += int64_t(prefix) * D;
    const uint8_t* row = keep + int64_t(b) * N;
    for (int i = 0; i < N; ++i)
      if (row[i]) {
        add_row(dst + int64_t(prefix + i) * D, src);
        src += D;
      }
  }
}

}  // namespace minivit
