#include "minivit/nn/conv3x3.h"

#include <algorithm>

#include "minivit/kernels/threads.h"

#if defined(__AVX512F__)
#include <immintrin.h>

#include "minivit/kernels/transpose16.h"
MINIVIT_INTRINSICS_BEGIN
#endif

namespace minivit {
MINIVIT_ISA_BEGIN

namespace {

// tap[ky * 3 + kx] = where the window of output (oy, ox) has its pixel (2 oy - 1 + ky,
// 2 ox - 1 + kx) in a channels-last image, null outside the image.
template <class Float>
void window_pixels(Float* (&tap)[9], Float* image, int oy, int ox, int C, int S) {
  for (int t = 0; t < 9; ++t) {
    const int y = 2 * oy - 1 + t / 3, x = 2 * ox - 1 + t % 3;
    tap[t] = y < 0 || y >= S || x < 0 || x >= S ? nullptr : image + (int64_t(y) * S + x) * C;
  }
}

// For each output position of images [b0, b1): where `keep` drops it, its row set to zero
// when `clear` holds, else left as it is; elsewhere fill(row, image, oy, ox) with `image`
// the position's input image.
template <class Fill>
void for_each_window_row(float* rows, const float* inp, int64_t b0, int64_t b1, int C, int S,
                         const uint8_t* keep, bool clear, Fill&& fill) {
  const int So = conv3x3_s2_side(S);
  const int64_t row_len = 9 * int64_t(C), image_len = int64_t(C) * S * S;
  for (int64_t b = b0; b < b1; ++b)
    for (int oy = 0; oy < So; ++oy)
      for (int ox = 0; ox < So; ++ox) {
        const int64_t position = b * So * So + int64_t(oy) * So + ox;
        float* row = rows + position * row_len;
        if (!keep || keep[position])
          fill(row, inp + b * image_len, oy, ox);
        else if (clear)
          std::fill_n(row, row_len, 0.0f);
      }
}

#if defined(__AVX512F__)
// Each entry of a row is stored one by one, 9 floats apart, in the tap-by-tap loop below:
// element by element the gather took 8% of the CIFAR-10 model's training step. These paths
// move the same values 16 at a time, turned in registers (transpose16).

// Channels last, C a multiple of 16: at each position, 16 channels' 9 taps (a vector per
// tap, zero outside the image) become 16 runs of 9, one per channel.
void gather_channels_last(float* rows, const float* inp, int64_t b0, int64_t b1, int C, int S,
                          const uint8_t* keep, bool clear) {
  const __mmask16 nine = 0x1FF;
  for_each_window_row(rows, inp, b0, b1, C, S, keep, clear,
                      [&](float* row, const float* image, int oy, int ox) {
    const float* tap[9];
    window_pixels(tap, image, oy, ox, C, S);
    for (int c0 = 0; c0 < C; c0 += 16) {
      __m512 v[16];
      for (int t = 0; t < 16; ++t)
        v[t] = t < 9 && tap[t] ? _mm512_loadu_ps(tap[t] + c0) : _mm512_setzero_ps();
      transpose16(v);  // v[l] holds channel c0 + l's taps in its first 9 lanes
      for (int l = 0; l < 16; ++l) _mm512_mask_storeu_ps(row + 9 * (c0 + l), nine, v[l]);
    }
  });
}

// Channels first, S a multiple of 32: 16 positions of an output row at a time, each entry of
// their rows a vector across the 16 (a stride-2 pick from one input row, shifted a pixel
// for the left column of the window), 16 entries turned into 16 positions' runs at a time.
void gather_channels_first(float* rows, const float* inp, int64_t b0, int64_t b1, int C,
                           int S, const uint8_t* keep, bool clear) {
  const int So = conv3x3_s2_side(S), features = 9 * C;
  const int64_t image_len = int64_t(C) * S * S;
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i odd_before = _mm512_sub_epi32(even, _mm512_set1_epi32(1));  // lane 0 unused
  for (int64_t b = b0; b < b1; ++b) {
    const float* image = inp + b * image_len;
    for (int oy = 0; oy < So; ++oy)
      for (int ox0 = 0; ox0 < So; ox0 += 16) {
        const int64_t first = b * So * So + int64_t(oy) * So + ox0;
        float* out = rows + first * features;
        const uint8_t* kept = keep ? keep + first : nullptr;
        if (kept && std::none_of(kept, kept + 16, [](uint8_t k) { return k != 0; })) {
          if (clear) std::fill_n(out, 16 * int64_t(features), 0.0f);
          continue;
        }
        // Entry f = (c, ky, kx) of the 16 positions ox0 .. ox0 + 15: pixel x = 2 ox - 1 + kx.
        auto entry = [&](int f) {
          const int c = f / 9, ky = f % 9 / 3, kx = f % 3, y = 2 * oy - 1 + ky;
          if (y < 0 || y >= S) return _mm512_setzero_ps();
          const float* line = image + (int64_t(c) * S + y) * S + 2 * ox0;
          const __m512 lo = _mm512_loadu_ps(line), hi = _mm512_loadu_ps(line + 16);
          if (kx == 1) return _mm512_permutex2var_ps(lo, even, hi);
          if (kx == 2) return _mm512_permutex2var_ps(lo, odd, hi);
          const __m512 shifted = _mm512_permutex2var_ps(lo, odd_before, hi);
          return _mm512_mask_mov_ps(shifted, 1, _mm512_set1_ps(ox0 > 0 ? line[-1] : 0.0f));
        };
        for (int f0 = 0; f0 < features; f0 += 16) {
          const int n = std::min(16, features - f0);
          __m512 v[16];
          for (int i = 0; i < 16; ++i) v[i] = i < n ? entry(f0 + i) : _mm512_setzero_ps();
          transpose16(v);  // v[p] holds position ox0 + p's entries f0 .. f0 + n - 1
          for (int p = 0; p < 16; ++p)
            _mm512_mask_storeu_ps(out + int64_t(p) * features + f0, __mmask16((1u << n) - 1),
                                  v[p]);
        }
        // Dropped positions among kept ones are stored, then cleared: a test inside the
        // store loop would cost every gather, patch dropout or not.
        for (int p = 0; kept && clear && p < 16; ++p)
          if (!kept[p]) std::fill_n(out + int64_t(p) * features, features, 0.0f);
      }
  }
}

#endif

// One position's row (9 C, in (channel, row, column) order) added into the pixels of its
// window in a channels-last image, tap by tap, the taps in order. For C a multiple of 16,
// each 16 channels' runs of 9 are turned into one vector of 16 channels per tap; every pixel
// takes its sums in the same order, so the bits are the same.
void add_row_into_window(float* image, const float* row, int oy, int ox, int C, int S) {
  float* tap[9];
  window_pixels(tap, image, oy, ox, C, S);
#if defined(__AVX512F__)
  if (C % 16 == 0) {
    const __mmask16 nine = 0x1FF;
    for (int c0 = 0; c0 < C; c0 += 16) {
      __m512 v[16];
      for (int l = 0; l < 16; ++l) v[l] = _mm512_maskz_loadu_ps(nine, row + 9 * (c0 + l));
      transpose16(v);  // v[t] holds tap t of channels c0 .. c0 + 15
      for (int t = 0; t < 9; ++t)
        if (tap[t])
          _mm512_storeu_ps(tap[t] + c0, _mm512_add_ps(_mm512_loadu_ps(tap[t] + c0), v[t]));
    }
    return;
  }
#endif
  for (int t = 0; t < 9; ++t)
    if (tap[t])
      for (int c = 0; c < C; ++c) tap[t][c] += row[t + 9 * c];
}

// Channels first (the images: few channels, their planes far apart): each row written in
// its order, a run of three neighbouring pixels per (channel, window row). On a Zen 2 the
// first stage's gather of 3 channels at side 32 took 3.9 us an image, against 10.1 tap by tap.
void gather_rows_in_order(float* rows, const float* inp, int64_t b0, int64_t b1, int C, int S,
                          const uint8_t* keep, bool clear) {
  const int64_t plane = int64_t(S) * S;
  for_each_window_row(rows, inp, b0, b1, C, S, keep, clear,
                      [&](float* row, const float* image, int oy, int ox) {
    const bool left = ox > 0, right = 2 * ox + 1 < S;
    for (int c = 0; c < C; ++c)
      for (int ky = 0; ky < 3; ++ky) {
        float* dst = row + 9 * c + 3 * ky;
        const int y = 2 * oy - 1 + ky;
        if (y < 0 || y >= S) {
          dst[0] = dst[1] = dst[2] = 0.0f;
          continue;
        }
        const float* src = image + c * plane + int64_t(y) * S + 2 * ox;
        dst[0] = left ? src[-1] : 0.0f;
        dst[1] = src[0];
        dst[2] = right ? src[1] : 0.0f;
      }
  });
}

// Channels last (the stem's own activations): tap by tap, each tap's channels a run in the
// image, stored every 9th entry of the row. At 32 channels this measured faster than
// writing the rows in order (8.3-9.6 against 15.8-16.4 us an image of side 16 on a Zen 2).
void gather_tap_by_tap(float* rows, const float* inp, int64_t b0, int64_t b1, int C, int S,
                       const uint8_t* keep, bool clear) {
  for_each_window_row(rows, inp, b0, b1, C, S, keep, clear,
                      [&](float* row, const float* image, int oy, int ox) {
    const float* tap[9];
    window_pixels(tap, image, oy, ox, C, S);
    for (int t = 0; t < 9; ++t) {
      float* dst = row + t;  // then every 9th entry, one per channel
      if (!tap[t])
        for (int c = 0; c < C; ++c) dst[9 * c] = 0.0f;
      else
        for (int c = 0; c < C; ++c) dst[9 * c] = tap[t][c];
    }
  });
}

}  // namespace

void conv3x3_s2_gather(float* rows, const float* inp, int B, int C, int S, bool channels_first,
                       const uint8_t* keep, bool clear_left_out) {
  const bool clear = clear_left_out;
  for_ranges(B, B >= 16, [&](int64_t b0, int64_t b1) {
#if defined(__AVX512F__)
    if (!channels_first && C % 16 == 0)
      return gather_channels_last(rows, inp, b0, b1, C, S, keep, clear);
    if (channels_first && S % 32 == 0)
      return gather_channels_first(rows, inp, b0, b1, C, S, keep, clear);
#endif
    if (channels_first)
      gather_rows_in_order(rows, inp, b0, b1, C, S, keep, clear);
    else
      gather_tap_by_tap(rows, inp, b0, b1, C, S, keep, clear);
  });
}

void conv3x3_s2_windows_read(uint8_t* read, const uint8_t* outputs, int B, int S) {
  const int So = conv3x3_s2_side(S);
  std::fill_n(read, int64_t(B) * S * S, uint8_t(0));
  for (int64_t b = 0; b < B; ++b)
    for (int oy = 0; oy < So; ++oy)
      for (int ox = 0; ox < So; ++ox) {
        if (!outputs[(b * So + oy) * So + ox]) continue;
        for (int y = std::max(0, 2 * oy - 1); y <= std::min(S - 1, 2 * oy + 1); ++y)
          for (int x = std::max(0, 2 * ox - 1); x <= std::min(S - 1, 2 * ox + 1); ++x)
            read[(b * S + y) * S + x] = 1;
      }
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
          add_row_into_window(image, next_row, oy, ox, C, S);
          next_row += row_len;
        }
    }
  });
}

MINIVIT_ISA_END
}  // namespace minivit

#if defined(__AVX512F__)
MINIVIT_INTRINSICS_END
#endif
