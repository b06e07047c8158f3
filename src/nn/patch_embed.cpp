#include "minivit/nn/patch_embed.h"

#include <cstdint>

namespace minivit {

void patchify(float* patches, const float* images, int B, int C, int image_size, int P) {
  const int G = image_size / P;
  const int N = G * G;
  const int patch_len = C * P * P;
#pragma omp parallel for schedule(static) if (B >= 16)
  for (int b = 0; b < B; ++b) {
    for (int gy = 0; gy < G; ++gy)
      for (int gx = 0; gx < G; ++gx) {
        float* dst = patches + (int64_t(b) * N + gy * G + gx) * patch_len;
        for (int c = 0; c < C; ++c)
          for (int py = 0; py < P; ++py) {
            const float* src = images + ((int64_t(b) * C + c) * image_size + gy * P + py) * image_size + gx * P;
            for (int px = 0; px < P; ++px) *dst++ = src[px];
          }
      }
  }
}

void embed_tokens_forward(float* tokens, const float* patch_proj, const float* cls_token,
                          const float* pos_embed, int B, int N, int D) {
  const int T = N + 1;
#pragma omp parallel for schedule(static) if (B >= 16)
  for (int b = 0; b < B; ++b) {
    float* out = tokens + int64_t(b) * T * D;
    for (int i = 0; i < D; ++i) out[i] = cls_token[i] + pos_embed[i];
    const float* proj = patch_proj + int64_t(b) * N * D;
    for (int64_t i = 0; i < int64_t(N) * D; ++i) out[D + i] = proj[i] + pos_embed[D + i];
  }
}

void embed_tokens_backward(float* dpatch_proj, float* dcls_token, float* dpos_embed,
                           const float* dtokens, int B, int N, int D) {
  const int T = N + 1;
  const int64_t TD = int64_t(T) * D;
  // Position gradients sum over the batch; split by element so each has one owner and a
  // fixed summation order.
#pragma omp parallel for schedule(static) if (B * TD > 65536)
  for (int64_t i = 0; i < TD; ++i) {
    float sum = 0.0f;
    for (int b = 0; b < B; ++b) sum += dtokens[b * TD + i];
    dpos_embed[i] += sum;
    if (i < D) dcls_token[i] += sum;  // cls enters exactly where pos[0] does
  }
#pragma omp parallel for schedule(static) if (B >= 16)
  for (int b = 0; b < B; ++b) {
    const float* src = dtokens + b * TD + D;
    float* dst = dpatch_proj + int64_t(b) * N * D;
    for (int64_t i = 0; i < int64_t(N) * D; ++i) dst[i] += src[i];
  }
}

}  // namespace minivit
