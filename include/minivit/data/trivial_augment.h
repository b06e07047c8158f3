#pragma once
// TrivialAugment (Mueller & Hutter, "TrivialAugment: Tuning-free Yet State-of-the-Art Data
// Augmentation", 2021) in its wide search space, as torchvision's TrivialAugmentWide has it:
// each training image gets one operation, picked uniformly from fourteen, at a strength
// picked uniformly from 31 steps (and a random sign where the operation has one). It acts on
// the 8-bit pixels after the random crop and flip and before normalisation, as torchvision
// places it in a CIFAR pipeline (RandomCrop, RandomHorizontalFlip, TrivialAugmentWide,
// ToTensor, Normalize). Pixels that geometric operations bring in from outside are 0.
#include <cstdint>

namespace minivit {

enum class TrivialOp : uint8_t {
  identity,
  shear_x,       // output (X, Y) samples the input at (X + m Y, Y); m in +-[0, 0.99]
  shear_y,       // at (X, Y + m X)
  translate_x,   // by trunc(m) pixels, m in +-[0, 32]
  translate_y,
  rotate,        // by m degrees counter-clockwise about the centre, m in +-[0, 135]
  brightness,    // blend with black by factor 1 + m, m in +-[0, 0.99]
  color,         // blend with the grey image (saturation); grey images are left alone
  contrast,      // blend with the mean grey level
  sharpness,     // blend with a 3x3 smoothed image, borders kept
  posterize,     // keep the top m bits, m from 8 down to 2
  solarize,      // invert pixels at or above the threshold m, from 255 down to 0
  auto_contrast, // stretch each channel to [0, 255]
  equalize,      // equalise each channel's histogram
};
constexpr int kTrivialOps = 14;
constexpr int kTrivialBins = 31;

struct TrivialDraw {
  TrivialOp op = TrivialOp::identity;
  float magnitude = 0.0f;  // signed where the operation has a sign
};

// The operation and strength of bin `bin` (0..30) with `negative` sign, as torchvision's
// TrivialAugmentWide maps them.
TrivialDraw trivial_draw(TrivialOp op, int bin, bool negative);

// Applies `draw` to `image` (C, H, W) 8-bit in place; `scratch` holds C * H * W bytes.
void apply_trivial_augment(uint8_t* image, int C, int H, int W, const TrivialDraw& draw,
                           uint8_t* scratch);

}  // namespace minivit
