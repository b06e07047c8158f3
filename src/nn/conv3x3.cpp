#include "minivit/nn/conv3x3.h"

#include <algorithm>

#include "minivit/kernels/threads.h"

namespace minivit {
MINIVIT_ISA_BEGIN

void conv3x3_s2_gather(float* rows, const float* inp, int B, int C, int S, bool channels_first) {
  const int So = conv3x3_s2_side(S);
  const int64_t row_len = 9 * int64_t(C), image_len = int64_t(C) * S * S;
  // Where channel c of pixel p sits within an image.
  const int64_t channel_stride = channels_first ? int64_t(S) * S : 1;
  const int64_t pixel_stride = channels_first ? 1 : C;
  for_ranges(B, B >= 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const float* image = inp + b * image_len;
      for (int oy = 0; oy < So; ++oy)
        for (int ox = 0; ox < So; ++ox) {
          float* row = rows + (b * So * So + int64_t(oy) * So + ox) * row_len;
          for (int ky = 0; ky < 3; ++ky) {
            const int y = 2 * oy - 1 + ky;
            for (int kx = 0; kx < 3; ++kx) {
              const int x = 2 * ox - 1 + kx;
              float* dst = row + ky * 3 + kx;  // then every 9th entry, one per channel
              if (y < 0 || y >= S || x < 0 || x >= S) {
                for (int c = 0; c < C; ++c) dst[9 * c] = 0.0f;
                continue;
              }
              const float* src = image + (int64_t(y) * S + x) * pixel_stride;
              for (int c = 0; c < C; ++c) dst[9 * c] = src[c * channel_stride];
            }
          }
        }
    }
  });
}

void conv3x3_s2_scatter(float* dinp, const float* drows, int B, int C, int S,
                        const uint8_t* keep, int kept) {
  const int So = conv3x3_s2_side(S);
  const int64_t row_len = 9 * int64_t(C), image_len = int64_t(C) * S * S;
  const int64_t rows_per_image = keep ? kept : int64_t(So) * So;
  for_ranges(B, B >= 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      float* image = dinp + b * image_len;
      const float* next_row = drows + b * rows_per_image * row_len;
      for (int oy = 0; oy < So; ++oy)
        for (int ox = 0; ox < So; ++ox) {
          if (keep && !keep[b * So * So + int64_t(oy) * So + ox]) continue;  // no row
          const float* row = next_row;
          next_row += row_len;
          for (int ky = 0; ky < 3; ++ky) {
            const int y = 2 * oy - 1 + ky;
            if (y < 0 || y >= S) continue;
            for (int kx = 0; kx < 3; ++kx) {
              const int x = 2 * ox - 1 + kx;
              if (x < 0 || x >= S) continue;
              float* dst = image + (int64_t(y) * S + x) * C;
              const float* src = row + ky * 3 + kx;
              for (int c = 0; c < C; ++c) dst[c] += src[9 * c];
            }
          }
        }
    }
  });
}

MINIVIT_ISA_END
}  // namespace minivit
