#include "minivit/data/augment.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "minivit/core/rng.h"

namespace minivit {

namespace {

// timm's RandomErasing defaults: area between 2% and a third of the image, aspect ratio
// log-uniform in [0.3, 1/0.3], ten tries to fit the rectangle inside the image.
constexpr float kEraseMinArea = 0.02f;
constexpr float kEraseMaxArea = 1.0f / 3.0f;
constexpr float kEraseMinAspect = 0.3f;
constexpr int kEraseAttempts = 10;

// TrivialAugment's three draws of an image, after those of the crop, flip and erasing.
constexpr uint64_t kTrivialDrawIndex = 64;

// The per-batch draws use the slot after the last possible image.
constexpr int64_t kBatchSlot = -1;

// Uniform integer in [0, n).
int rng_below(uint64_t key, uint64_t index, int n) {
  return n <= 1 ? 0 : int(rng_u64(key, index) % uint64_t(n));
}

// Uniform in (0, 1], from a stream of its own: rng_normal(key, i) consumes rng_u64(key, 2i)
// and (key, 2i + 1), so uniforms drawn from `key` itself would repeat the normals' bits.
double rng_open_uniform(uint64_t key, uint64_t index) {
  return (double(rng_u64(rng_key(key, kRngAugment), index) >> 11) + 1.0) * 0x1.0p-53;
}

// Gamma(shape, 1) by Marsaglia and Tsang's squeeze method; shape < 1 through
// Gamma(shape + 1) * U^(1/shape). Draws consume indices from *counter.
double rng_gamma(uint64_t key, uint64_t* counter, double shape) {
  double boost = 1.0;
  if (shape < 1.0) {
    const double u = rng_open_uniform(key, (*counter)++);
    boost = std::pow(u, 1.0 / shape);
    shape += 1.0;
  }
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = rng_normal(key, (*counter)++);
    const double v1 = 1.0 + c * x;
    if (v1 <= 0) continue;
    const double v = v1 * v1 * v1;
    const double u = rng_open_uniform(key, (*counter)++);
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v * boost;
  }
}

}  // namespace

float rng_beta_symmetric(uint64_t key, float alpha) {
  uint64_t counter = 0;
  const double x = rng_gamma(key, &counter, alpha);
  const double y = rng_gamma(key, &counter, alpha);
  return x + y > 0 ? float(x / (x + y)) : 0.5f;
}

ImageAugment draw_image_augment(const DataConfig& data, int H, int W, uint64_t seed,
                                int64_t step, int slot) {
  ImageAugment aug;
  if (!data.augment) return aug;
  const uint64_t key = rng_key(seed, kRngAugment, uint64_t(step), uint64_t(slot));
  const int pad = data.crop_padding;
  if (pad > 0) {
    aug.shift_x = rng_below(key, 0, 2 * pad + 1) - pad;
    aug.shift_y = rng_below(key, 1, 2 * pad + 1) - pad;
  }
  aug.flip = data.hflip > 0 && rng_uniform(key, 2) < data.hflip;
  if (data.auto_augment == AutoAugment::trivial)
    aug.trivial = trivial_draw(TrivialOp(rng_below(key, kTrivialDrawIndex, kTrivialOps)),
                               rng_below(key, kTrivialDrawIndex + 1, kTrivialBins),
                               rng_below(key, kTrivialDrawIndex + 2, 2) == 1);
  if (data.erasing > 0 && rng_uniform(key, 3) < data.erasing) {
    const float area = float(H) * float(W);
    const float log_min = std::log(kEraseMinAspect), log_max = -log_min;
    for (int attempt = 0; attempt < kEraseAttempts && !aug.erase; ++attempt) {
      const uint64_t i = 4 + 4 * uint64_t(attempt);
      const float target = area * (kEraseMinArea + (kEraseMaxArea - kEraseMinArea) * rng_uniform(key, i));
      const float aspect = std::exp(log_min + (log_max - log_min) * rng_uniform(key, i + 1));
      const int h = int(std::lround(std::sqrt(target * aspect)));
      const int w = int(std::lround(std::sqrt(target / aspect)));
      if (h < 1 || w < 1 || h >= H || w >= W) continue;
      aug.erase = true;
      aug.erase_h = h, aug.erase_w = w;
      aug.erase_y = rng_below(key, i + 2, H - h + 1);
      aug.erase_x = rng_below(key, i + 3, W - w + 1);
    }
    aug.noise_key = rng_key(key, kRngAugment);
  }
  return aug;
}

void augment_image(float* out, const uint8_t* src, int C, int H, int W, const float* scale,
                   const float* shift, const ImageAugment& aug, uint8_t* pixels) {
  const int64_t plane = int64_t(H) * W;
  std::fill(pixels, pixels + C * plane, uint8_t(0));  // after the crop and flip
  for (int c = 0; c < C; ++c)
    for (int y = 0; y < H; ++y) {
      const int sy = y + aug.shift_y;
      if (sy < 0 || sy >= H) continue;  // a whole padding row: pixel 0
      const uint8_t* src_row = src + c * plane + int64_t(sy) * W;
      uint8_t* row = pixels + c * plane + int64_t(y) * W;
      for (int x = 0; x < W; ++x) {
        const int sx = (aug.flip ? W - 1 - x : x) + aug.shift_x;
        if (sx >= 0 && sx < W) row[x] = src_row[sx];
      }
    }
  if (aug.trivial) apply_trivial_augment(pixels, C, H, W, *aug.trivial, pixels + C * plane);
  for (int c = 0; c < C; ++c)
    for (int64_t i = 0; i < plane; ++i)
      out[c * plane + i] = float(pixels[c * plane + i]) * scale[c] + shift[c];
  if (!aug.erase) return;
  for (int c = 0; c < C; ++c)
    for (int y = aug.erase_y; y < aug.erase_y + aug.erase_h; ++y)
      for (int x = aug.erase_x; x < aug.erase_x + aug.erase_w; ++x) {
        const int64_t i = (int64_t(c) * H + y) * W + x;
        out[i] = float(rng_normal(aug.noise_key, uint64_t(i)));
      }
}

BatchMix draw_batch_mix(const DataConfig& data, int H, int W, uint64_t seed, int64_t step) {
  BatchMix mix;
  if (!data.augment || (data.mixup <= 0 && data.cutmix <= 0)) return mix;
  const uint64_t key = rng_key(seed, kRngAugment, uint64_t(step), uint64_t(kBatchSlot));
  if (rng_uniform(key, 0) >= data.mix_prob) return mix;
  const bool cutmix = data.cutmix > 0 && (data.mixup <= 0 || rng_uniform(key, 1) < 0.5f);
  const float alpha = cutmix ? data.cutmix : data.mixup;
  mix.lambda = rng_beta_symmetric(rng_key(key, 2), alpha);
  if (!cutmix) {
    mix.kind = BatchMix::kMixup;
    return mix;
  }
  mix.kind = BatchMix::kCutmix;
  const float cut = std::sqrt(1.0f - mix.lambda);
  const int cut_h = int(float(H) * cut), cut_w = int(float(W) * cut);
  const int cy = rng_below(key, 3, H), cx = rng_below(key, 4, W);
  mix.box_y0 = std::clamp(cy - cut_h / 2, 0, H), mix.box_y1 = std::clamp(cy + cut_h / 2, 0, H);
  mix.box_x0 = std::clamp(cx - cut_w / 2, 0, W), mix.box_x1 = std::clamp(cx + cut_w / 2, 0, W);
  mix.lambda = 1.0f - float((mix.box_y1 - mix.box_y0) * (mix.box_x1 - mix.box_x0)) / float(H * W);
  return mix;
}

void apply_batch_mix(float* images, float* targets, int B, int C, int H, int W, int K,
                     const BatchMix& mix) {
  if (mix.kind == BatchMix::kNone) return;
  const int64_t image_len = int64_t(C) * H * W;
  const float lam = mix.lambda, rest = 1.0f - lam;
  // Pairs (b, B-1-b) are mixed together, so the batch is mixed in place; with an odd batch
  // the middle image is its own partner and stays as it is.
  for (int b = 0; b < B / 2; ++b) {
    float* x = images + int64_t(b) * image_len;
    float* y = images + int64_t(B - 1 - b) * image_len;
    if (mix.kind == BatchMix::kMixup) {
      for (int64_t i = 0; i < image_len; ++i) {
        const float xi = x[i], yi = y[i];
        x[i] = lam * xi + rest * yi;
        y[i] = lam * yi + rest * xi;
      }
    } else {
      for (int c = 0; c < C; ++c)
        for (int r = mix.box_y0; r < mix.box_y1; ++r)
          for (int col = mix.box_x0; col < mix.box_x1; ++col) {
            const int64_t i = (int64_t(c) * H + r) * W + col;
            std::swap(x[i], y[i]);
          }
    }
    float* tx = targets + int64_t(b) * K;
    float* ty = targets + int64_t(B - 1 - b) * K;
    for (int k = 0; k < K; ++k) {
      const float a = tx[k], t = ty[k];
      tx[k] = lam * a + rest * t;
      ty[k] = lam * t + rest * a;
    }
  }
}

}  // namespace minivit
