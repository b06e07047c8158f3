#include "minivit/nn/drop_path.h"

#include "minivit/core/rng.h"

namespace minivit {
MINIVIT_ISA_BEGIN

float drop_path_rate(float rate, int block, int depth) {
  if (depth < 2) return 0.0f;
  return float(double(rate) * block / (depth - 1));
}

// Over one chunk of images, on the calling thread: a chunk is a few images (vit_passes.h),
// already one thread's share of the batch.
void drop_path_forward(float* branch, float* scale, int n, int64_t per_image, float p,
                       uint64_t key, int64_t first_image) {
  const float kept = 1.0f / (1.0f - p);
  for (int b = 0; b < n; ++b)
    scale[b] = rng_uniform(key, uint64_t(first_image + b)) >= p ? kept : 0.0f;
  scale_images(branch, scale, n, per_image);
}

void scale_images(float* x, const float* scale, int n, int64_t per_image) {
  for (int b = 0; b < n; ++b) {
    const float s = scale[b];
    float* image = x + b * per_image;
    for (int64_t i = 0; i < per_image; ++i) image[i] *= s;
  }
}

void drop_path_backward(float* dinp, const float* dout, const float* scale, int n,
                        int64_t per_image, bool add_into) {
  for (int b = 0; b < n; ++b) {
    const float s = scale[b];
    const float* g = dout + b * per_image;
    float* d = dinp + b * per_image;
    if (add_into)
      for (int64_t i = 0; i < per_image; ++i) d[i] += g[i] * s;
    else
      for (int64_t i = 0; i < per_image; ++i) d[i] = 0.0f + g[i] * s;
  }
}

MINIVIT_ISA_END
}  // namespace minivit
