#include "minivit/nn/patch_embed.h"

#include <algorithm>
#include <cstdint>

#include "minivit/kernels/threads.h"

namespace minivit {
MINIVIT_ISA_BEGIN

void patchify(float* patches, const float* images, int B, int C, int image_size, int P,
              bool shifted) {
  const int G = image_size / P;
  const int N = G * G;
  const int copies = shifted ? 5 : 1;
  const int patch_len = copies * C * P * P;
  // Where each copy's window lies against the patch: (row, column) offsets in pixels.
  const int h = P / 2;
  const int shift_y[5] = {0, -h, -h, h, h}, shift_x[5] = {0, -h, h, -h, h};
  for_ranges(B, B >= 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      for (int gy = 0; gy < G; ++gy)
        for (int gx = 0; gx < G; ++gx) {
          float* dst = patches + (int64_t(b) * N + gy * G + gx) * patch_len;
          for (int copy = 0; copy < copies; ++copy)
            for (int c = 0; c < C; ++c) {
              const float* channel = images + (int64_t(b) * C + c) * image_size * image_size;
              // A row of the window: the pixels inside the image, zeros beyond its edges.
              const int x0 = gx * P + shift_x[copy];
              const int first = std::clamp(-x0, 0, P), end = std::clamp(image_size - x0, first, P);
              for (int py = 0; py < P; ++py, dst += P) {
                const int y = gy * P + py + shift_y[copy];
                if (y < 0 || y >= image_size) {
                  std::fill_n(dst, P, 0.0f);
                  continue;
                }
                const float* inside = channel + int64_t(y) * image_size + (x0 + first);
                std::fill(dst, dst + first, 0.0f);
                std::copy(inside, inside + (end - first), dst + first);
                std::fill(dst + end, dst + P, 0.0f);
              }
            }
        }
    }
  });
}

// dst (D) = row + pos, or row alone without position embedding.
static void add_position(float* __restrict dst, const float* __restrict row,
                         const float* __restrict pos, int D) {
  if (!pos) return void(std::copy_n(row, D, dst));
#pragma omp simd
  for (int j = 0; j < D; ++j) dst[j] = row[j] + pos[j];
}

void embed_tokens_forward(float* tokens, const float* patch_proj, const float* cls_token,
                          const float* pos_embed, int B, int N, int D, const uint8_t* keep,
                          int kept) {
  const int prefix = cls_token ? 1 : 0, K = keep ? kept : N;
  for_ranges(B, B >= 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      float* dst = tokens + b * (prefix + K) * D;
      const float* src = patch_proj + b * K * D;
      if (prefix) {
        add_position(dst, cls_token, pos_embed, D);
        dst += D;
      }
      const uint8_t* row = keep ? keep + b * N : nullptr;
      for (int i = 0; i < N; ++i) {
        if (row && !row[i]) continue;
        add_position(dst, src, pos_embed ? pos_embed + int64_t(prefix + i) * D : nullptr, D);
        dst += D;
        src += D;
      }
    }
  });
}

// Adds the batch's sum of each element of dtokens (B, T, D) over its first `count`
// elements into dsum, and of the first `also_count` of them into dalso as well. Each sum runs
// over the batch in order from +0, whatever the thread count. A block of elements at a time,
// row by row of the batch: one element at a time strode through memory by T D floats, onto
// the same few cache sets.
static void add_batch_sums(float* dsum, const float* dtokens, int B, int64_t TD, int64_t count,
                           float* dalso = nullptr, int64_t also_count = 0) {
  constexpr int64_t kBlock = 256;
  for_ranges((count + kBlock - 1) / kBlock, B * TD > 65536, [&](int64_t blk0, int64_t blk1) {
    for (int64_t blk = blk0; blk < blk1; ++blk) {
      const int64_t i0 = blk * kBlock, n = std::min(kBlock, count - i0);
      float sums[kBlock] = {};
      for (int b = 0; b < B; ++b) {
        const float* row = dtokens + b * TD + i0;
        for (int64_t j = 0; j < n; ++j) sums[j] += row[j];
      }
      for (int64_t j = 0; j < n; ++j) dsum[i0 + j] += sums[j];
      for (int64_t j = 0; j < std::min(n, also_count - i0); ++j) dalso[i0 + j] += sums[j];
    }
  });
}

// 0 + the gradient, as adding into zeros rounds it (a zero's sign included).
static void set_patch_rows(float* dpatch_proj, const float* dtokens, int B, int N, int D,
                           int64_t first_patch_row) {
  const int64_t TD = (first_patch_row + N) * int64_t(D);
  for_ranges(B, B >= 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const float* src = dtokens + b * TD + first_patch_row * D;
      float* dst = dpatch_proj + int64_t(b) * N * D;
      for (int64_t i = 0; i < int64_t(N) * D; ++i) dst[i] = 0.0f + src[i];
    }
  });
}

void embed_tokens_backward(float* dpatch_proj, float* dcls_token, float* dpos_embed,
                           const float* dtokens, int B, int N, int D) {
  const int T = N + 1;
  const int64_t TD = int64_t(T) * D;
  if (dpos_embed) {
    // cls enters exactly where pos[0] does
    add_batch_sums(dpos_embed, dtokens, B, TD, TD, dcls_token, D);
  } else {
    add_batch_sums(dcls_token, dtokens, B, TD, D);
  }
  set_patch_rows(dpatch_proj, dtokens, B, N, D, 1);
}

void embed_patch_tokens_backward(float* dpatch_proj, float* dpos_embed, const float* dtokens,
                                 int B, int N, int D) {
  const int64_t ND = int64_t(N) * D;
  if (dpos_embed) add_batch_sums(dpos_embed, dtokens, B, ND, ND);
  if (dtokens != dpatch_proj) set_patch_rows(dpatch_proj, dtokens, B, N, D, 0);
}

MINIVIT_ISA_END
}  // namespace minivit
