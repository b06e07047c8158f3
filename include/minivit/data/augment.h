#pragma once
// Training-time augmentation, as timm applies it to small images:
//   per image: random crop of the zero-padded image, horizontal flip, TrivialAugment
//   (data/trivial_augment.h), random erasing;
//   per batch: mixup or cutmix, which mix images and their target distributions.
// Every draw is a pure function of (seed, step, image slot), so a batch is the same on any
// thread count and after a resume. Legend: B batch, C channels, H x W pixels, K classes.
#include <cstdint>
#include <optional>

#include "minivit/core/config.h"
#include "minivit/data/trivial_augment.h"

namespace minivit {

// What one image of a training batch gets.
struct ImageAugment {
  int shift_x = 0, shift_y = 0;  // crop offset against the unpadded image, in [-pad, pad]
  bool flip = false;             // mirror left-right (after the crop)
  std::optional<TrivialDraw> trivial;  // data.auto_augment = trivial: its operation
  bool erase = false;            // a rectangle [erase_x, +erase_w) x [erase_y, +erase_h)
  int erase_x = 0, erase_y = 0, erase_w = 0, erase_h = 0;
  uint64_t noise_key = 0;        // the erased pixels are N(0, 1) drawn from this key
};

// The draws for image `slot` of the batch of `step`.
ImageAugment draw_image_augment(const DataConfig& data, int H, int W, uint64_t seed,
                                int64_t step, int slot);

// Writes one augmented, normalised image: out (C, H, W) = crop/flip of src (C, H, W) uint8,
// padding pixels are 0 (black) before normalisation, i.e. as torchvision's RandomCrop pads;
// TrivialAugment's operation on those 8-bit pixels; then erasing overwrites its rectangle
// with noise in the normalised space (timm's RandomErasing in "pixel" mode, which acts
// after normalisation).
// scale[c] and shift[c] map a pixel value to its normalised value: v * scale + shift.
// `pixels` is the caller's scratch of augment_scratch_bytes(C, H, W).
void augment_image(float* out, const uint8_t* src, int C, int H, int W, const float* scale,
                   const float* shift, const ImageAugment& aug, uint8_t* pixels);
inline int64_t augment_scratch_bytes(int C, int H, int W) { return 2 * int64_t(C) * H * W; }

// Mixing of a whole batch: image b is mixed with image B-1-b (timm's flipped-batch pairing,
// which needs no second batch).
struct BatchMix {
  enum Kind { kNone, kMixup, kCutmix } kind = kNone;
  float lambda = 1.0f;        // weight of the image's own target
  int box_x0 = 0, box_y0 = 0;  // cutmix: pixels [x0, x1) x [y0, y1) come from the partner
  int box_x1 = 0, box_y1 = 0;
};

// Draws the mix of the batch of `step`: with probability mix_prob, mixup or cutmix (each
// half of the time when both are on), lambda ~ Beta(alpha, alpha). For cutmix the box has
// area (1 - lambda) * H * W, clipped to the image, and lambda is recomputed from the clipped
// area so the targets weigh exactly what the pixels show.
BatchMix draw_batch_mix(const DataConfig& data, int H, int W, uint64_t seed, int64_t step);

// Applies `mix` in place: images (B, C, H, W), targets (B, K).
void apply_batch_mix(float* images, float* targets, int B, int C, int H, int W, int K,
                     const BatchMix& mix);

// A Beta(alpha, alpha) draw (alpha > 0) from the counter stream `key`; used by the mixes.
float rng_beta_symmetric(uint64_t key, float alpha);

}  // namespace minivit
