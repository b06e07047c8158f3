#include "minivit/nn/patch_drop.h"

#include <algorithm>

#include "minivit/core/rng.h"
#include "minivit/kernels/threads.h"

namespace minivit {
MINIVIT_ISA_BEGIN

void patch_drop_draw(uint8_t* keep, float* draws, int n, int N, int kept, uint64_t key,
                     int64_t first_image) {
  for (int b = 0; b < n; ++b) {
    const uint64_t first = uint64_t(first_image + b) * uint64_t(N);
    auto draw = [&](int i) { return rng_uniform(key, first + uint64_t(i)); };
    float* row_draws = draws + int64_t(b) * N;
    for (int i = 0; i < N; ++i) row_draws[i] = draw(i);
    // The kept-th smallest draw; every patch below it is kept, and those equal to it in
    // index order until `kept` are: the same subset on every machine. The partition puts
    // every draw below the threshold among its first kept - 1 places; it has lost the
    // patches' order, so the pass that marks them draws again.
    std::nth_element(row_draws, row_draws + (kept - 1), row_draws + N);
    const float threshold = row_draws[kept - 1];
    int at_threshold = kept;
    for (int j = 0; j + 1 < kept; ++j) at_threshold -= row_draws[j] < threshold;
    uint8_t* row = keep + int64_t(b) * N;
    for (int i = 0; i < N; ++i) {
      const float u = draw(i);
      const bool take = u < threshold || (u == threshold && at_threshold > 0);
      if (u == threshold && take) --at_threshold;
      row[i] = take ? 1 : 0;
    }
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
                         int prefix, int N, int kept, int D, bool add_into) {
  auto take_row = [D, add_into](float* d, const float* s) {
    if (add_into) {
#pragma omp simd
      for (int j = 0; j < D; ++j) d[j] += s[j];
    } else {
#pragma omp simd
      for (int j = 0; j < D; ++j) d[j] = 0.0f + s[j];
    }
  };
  const int64_t image_floats = int64_t(prefix + N) * D;
  for_ranges(n, n * image_floats > 65536, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      float* dst = dtokens + b * image_floats;
      const float* src = dout + b * (prefix + kept) * D;
      for (int r = 0; r < prefix; ++r) take_row(dst + int64_t(r) * D, src + int64_t(r) * D);
      src += int64_t(prefix) * D;
      const uint8_t* row = keep + b * N;
      for (int i = 0; i < N; ++i) {
        float* patch_row = dst + int64_t(prefix + i) * D;
        if (row[i]) {
          take_row(patch_row, src);
          src += D;
        } else if (!add_into) {
          std::fill_n(patch_row, D, 0.0f);
        }
      }
    }
  });
}

void patch_drop_spread(float* full, const float* kept_rows, const uint8_t* keep, int n, int N,
                       int kept, int D) {
  for (int b = 0; b < n; ++b) {
    float* dst = full + int64_t(b) * N * D;
    const float* src = kept_rows + int64_t(b) * kept * D;
    const uint8_t* row = keep + int64_t(b) * N;
    for (int i = 0; i < N; ++i) {
      if (row[i]) {
        std::copy_n(src, D, dst + int64_t(i) * D);
        src += D;
      } else {
        std::fill_n(dst + int64_t(i) * D, D, 0.0f);
      }
    }
  }
}

MINIVIT_ISA_END
}  // namespace minivit
