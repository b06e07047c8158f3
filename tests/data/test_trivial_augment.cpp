// TrivialAugment's operations on known 8-bit images, its strengths as torchvision's wide
// space maps them, and its draws.
#include <array>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include "minivit/core/config.h"
#include "minivit/data/augment.h"
#include "minivit/data/trivial_augment.h"

using namespace minivit;

namespace {

// One channel whose pixel (y, x) is 10 y + x + 1 (so 0 only where padding brings it in).
std::vector<uint8_t> numbered(int H, int W) {
  std::vector<uint8_t> img(size_t(H * W));
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) img[size_t(y * W + x)] = uint8_t(10 * y + x + 1);
  return img;
}

std::vector<uint8_t> applied(std::vector<uint8_t> img, int C, int H, int W, TrivialDraw draw) {
  std::vector<uint8_t> scratch(img.size());
  apply_trivial_augment(img.data(), C, H, W, draw, scratch.data());
  return img;
}

TrivialDraw op(TrivialOp o, float magnitude) {
  TrivialDraw d;
  d.op = o;
  d.magnitude = magnitude;
  return d;
}

}  // namespace

TEST_CASE("TrivialAugment's strengths are torchvision's wide space", "[augment][trivial]") {
  CHECK(trivial_draw(TrivialOp::shear_x, 30, false).magnitude == Approx(0.99f));
  CHECK(trivial_draw(TrivialOp::shear_y, 15, true).magnitude == Approx(-0.495f));
  CHECK(trivial_draw(TrivialOp::translate_x, 30, true).magnitude == Approx(-32.0f));
  CHECK(trivial_draw(TrivialOp::rotate, 10, false).magnitude == Approx(45.0f));
  CHECK(trivial_draw(TrivialOp::brightness, 0, true).magnitude == 0.0f);
  CHECK(trivial_draw(TrivialOp::solarize, 0, true).magnitude == 255.0f);  // no sign
  CHECK(trivial_draw(TrivialOp::solarize, 30, false).magnitude == 0.0f);
  CHECK(trivial_draw(TrivialOp::equalize, 17, true).magnitude == 0.0f);
  // Posterize: 8 - round(bin / 5) bits.
  const std::array<std::pair<int, float>, 6> bits = {
      {{0, 8.0f}, {2, 8.0f}, {3, 7.0f}, {12, 6.0f}, {13, 5.0f}, {30, 2.0f}}};
  for (auto [bin, expected] : bits)
    CHECK(trivial_draw(TrivialOp::posterize, bin, true).magnitude == expected);
}

TEST_CASE("TrivialAugment's geometric operations move pixels and bring in black",
          "[augment][trivial]") {
  const int H = 4, W = 4;
  const std::vector<uint8_t> img = numbered(H, W);
  auto at = [&](const std::vector<uint8_t>& v, int y, int x) { return int(v[size_t(y * W + x)]); };
  CHECK(applied(img, 1, H, W, op(TrivialOp::identity, 0)) == img);

  // Translation by trunc(m) pixels: +3.7 moves the content 3 to the right.
  const auto right = applied(img, 1, H, W, op(TrivialOp::translate_x, 3.7f));
  const auto up = applied(img, 1, H, W, op(TrivialOp::translate_y, -1.2f));
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      CHECK(at(right, y, x) == (x >= 3 ? at(img, y, x - 3) : 0));
      CHECK(at(up, y, x) == (y < H - 1 ? at(img, y + 1, x) : 0));
    }

  // 90 degrees counter-clockwise: the right column becomes the top row.
  const auto turned = applied(img, 1, H, W, op(TrivialOp::rotate, 90.0f));
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) CHECK(at(turned, y, x) == at(img, x, W - 1 - y));

  // Shear along x by 0.5: row y samples x + 0.5 (y + 0.5), so row 0 stays and row 3 moves
  // two pixels to the left.
  const auto sheared = applied(img, 1, H, W, op(TrivialOp::shear_x, 0.5f));
  for (int x = 0; x < W; ++x) {
    CHECK(at(sheared, 0, x) == at(img, 0, x));
    CHECK(at(sheared, 3, x) == (x + 2 < W ? at(img, 3, x + 2) : 0));
  }
  const auto sheared_y = applied(img, 1, H, W, op(TrivialOp::shear_y, 0.5f));
  for (int y = 0; y < H; ++y) {
    CHECK(at(sheared_y, y, 0) == at(img, y, 0));
    CHECK(at(sheared_y, y, 3) == (y + 2 < H ? at(img, y + 2, 3) : 0));
  }

  // Every channel moves alike.
  std::vector<uint8_t> two = img;
  two.insert(two.end(), img.begin(), img.end());
  const auto both = applied(two, 2, H, W, op(TrivialOp::rotate, 90.0f));
  CHECK(std::vector<uint8_t>(both.begin(), both.begin() + H * W) == turned);
  CHECK(std::vector<uint8_t>(both.begin() + H * W, both.end()) == turned);
}

TEST_CASE("TrivialAugment's colour operations blend, clamp and truncate as torchvision does",
          "[augment][trivial]") {
  const std::vector<uint8_t> grey = {100, 200, 101, 0};
  CHECK(applied(grey, 1, 2, 2, op(TrivialOp::brightness, 0.5f)) ==
        std::vector<uint8_t>{150, 255, 151, 0});
  CHECK(applied(grey, 1, 2, 2, op(TrivialOp::brightness, -0.5f)) ==
        std::vector<uint8_t>{50, 100, 50, 0});
  // Saturation leaves a grey image alone; at factor 0 every channel is the grey level.
  CHECK(applied(grey, 1, 2, 2, op(TrivialOp::color, -0.9f)) == grey);
  const std::vector<uint8_t> rgb = {200, 10, 50, 90, 0, 250, 30, 70, 10, 20, 200, 40};
  const auto washed = applied(rgb, 3, 2, 2, op(TrivialOp::color, -1.0f));
  for (int i = 0; i < 4; ++i) {
    const uint8_t level = uint8_t(0.2989f * rgb[size_t(i)] + 0.587f * rgb[size_t(4 + i)] +
                                  0.114f * rgb[size_t(8 + i)]);
    for (int c = 0; c < 3; ++c) CHECK(washed[size_t(c * 4 + i)] == level);
  }
  // Contrast at factor 0: every pixel is the mean grey level, truncated (100.25 -> 100).
  const auto flat = applied(grey, 1, 2, 2, op(TrivialOp::contrast, -1.0f));
  CHECK(flat == std::vector<uint8_t>{100, 100, 100, 100});
  CHECK(applied({10, 20, 30, 41}, 1, 2, 2, op(TrivialOp::contrast, -1.0f)) ==
        std::vector<uint8_t>{25, 25, 25, 25});
  // Sharpness at factor 0 is the smoothed image inside and the image on its border.
  std::vector<uint8_t> dot(9, 0);
  dot[4] = 130;
  const auto smooth = applied(dot, 1, 3, 3, op(TrivialOp::sharpness, -1.0f));
  CHECK(smooth == std::vector<uint8_t>{0, 0, 0, 0, 50, 0, 0, 0, 0});  // 130 * 5 / 13
  CHECK(applied(dot, 1, 3, 3, op(TrivialOp::sharpness, 0.0f)) == dot);
}

TEST_CASE("TrivialAugment's level operations: posterize, solarize, auto contrast, equalize",
          "[augment][trivial]") {
  CHECK(applied({0xBF, 0x40, 0xFF, 0x3F}, 1, 2, 2, op(TrivialOp::posterize, 2.0f)) ==
        std::vector<uint8_t>{0x80, 0x40, 0xC0, 0x00});
  CHECK(applied({0xBF, 0x40, 0xFF, 0x3F}, 1, 2, 2, op(TrivialOp::posterize, 8.0f)) ==
        std::vector<uint8_t>{0xBF, 0x40, 0xFF, 0x3F});
  CHECK(applied({200, 127, 128, 0}, 1, 2, 2, op(TrivialOp::solarize, 128.0f)) ==
        std::vector<uint8_t>{55, 127, 127, 0});
  CHECK(applied({200, 127, 128, 0}, 1, 2, 2, op(TrivialOp::solarize, 0.0f)) ==
        std::vector<uint8_t>{55, 128, 127, 255});
  // Auto contrast stretches each channel on its own; a flat channel stays.
  CHECK(applied({50, 150, 100, 50, 7, 7, 7, 7}, 2, 2, 2, op(TrivialOp::auto_contrast, 0)) ==
        std::vector<uint8_t>{0, 255, 127, 0, 7, 7, 7, 7});
  // Equalize, 32 x 32 pixels: 512 at level 10, 256 at 20, 256 at 30. The step is
  // (1024 - 256) / 255 = 3, and level v maps to (pixels below v + 1) / 3, at most 255.
  std::vector<uint8_t> levels(1024, 10);
  std::fill(levels.begin() + 512, levels.begin() + 768, 20);
  std::fill(levels.begin() + 768, levels.end(), 30);
  const auto equalized = applied(levels, 1, 32, 32, op(TrivialOp::equalize, 0));
  CHECK(std::set<uint8_t>(equalized.begin(), equalized.begin() + 512) == std::set<uint8_t>{0});
  CHECK(equalized[600] == 171);
  CHECK(equalized[900] == 255);
  // Too few pixels below the top level for a step: unchanged.
  CHECK(applied({0, 0, 100, 200}, 1, 2, 2, op(TrivialOp::equalize, 0)) ==
        std::vector<uint8_t>{0, 0, 100, 200});
}

TEST_CASE("TrivialAugment draws one of the fourteen operations per image, and only when on",
          "[augment][trivial]") {
  DataConfig data;
  data.augment = true;
  CHECK_FALSE(draw_image_augment(data, 32, 32, 7, 3, 0).trivial.has_value());
  data.auto_augment = AutoAugment::trivial;
  CHECK(data.augments());
  std::set<int> ops;
  int negative = 0, signed_draws = 0;
  for (int slot = 0; slot < 2000; ++slot) {
    const ImageAugment aug = draw_image_augment(data, 32, 32, 7, 3, slot);
    REQUIRE(aug.trivial.has_value());
    ops.insert(int(aug.trivial->op));
    if (aug.trivial->op == TrivialOp::rotate && aug.trivial->magnitude != 0.0f) {
      ++signed_draws;
      negative += aug.trivial->magnitude < 0;
    }
    const ImageAugment again = draw_image_augment(data, 32, 32, 7, 3, slot);
    CHECK(int(again.trivial->op) == int(aug.trivial->op));
    CHECK(again.trivial->magnitude == aug.trivial->magnitude);
  }
  CHECK(ops.size() == size_t(kTrivialOps));
  CHECK(negative > signed_draws / 3);
  CHECK(negative < 2 * signed_draws / 3);
  // The draws of the crop and flip are the same with the policy on or off.
  DataConfig plain = data;
  plain.auto_augment = AutoAugment::none;
  plain.crop_padding = data.crop_padding = 4;
  plain.hflip = data.hflip = 0.5f;
  for (int slot = 0; slot < 50; ++slot) {
    const ImageAugment a = draw_image_augment(data, 32, 32, 7, 3, slot);
    const ImageAugment b = draw_image_augment(plain, 32, 32, 7, 3, slot);
    CHECK(a.shift_x == b.shift_x);
    CHECK(a.shift_y == b.shift_y);
    CHECK(a.flip == b.flip);
  }
}

TEST_CASE("augment_image applies TrivialAugment after the crop and flip, before normalising",
          "[augment][trivial]") {
  const int H = 4, W = 4;
  std::vector<uint8_t> scratch(size_t(augment_scratch_bytes(1, H, W)));
  const std::vector<uint8_t> img = numbered(H, W);
  const float scale = 0.5f, shift = -1.0f;
  ImageAugment aug;
  aug.shift_x = 1;  // the crop brings in a black column on the right
  std::vector<float> plain(img.size()), identity(img.size()), solarized(img.size());
  augment_image(plain.data(), img.data(), 1, H, W, &scale, &shift, aug, scratch.data());
  aug.trivial = op(TrivialOp::identity, 0);
  augment_image(identity.data(), img.data(), 1, H, W, &scale, &shift, aug, scratch.data());
  CHECK(identity == plain);
  // Solarizing at 0 inverts every pixel, the crop's black one too: it acted after the crop.
  aug.trivial = op(TrivialOp::solarize, 0.0f);
  augment_image(solarized.data(), img.data(), 1, H, W, &scale, &shift, aug, scratch.data());
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      const int pixel = x + 1 < W ? img[size_t(y * W + x + 1)] : 0;
      CHECK(solarized[size_t(y * W + x)] == float(255 - pixel) * scale + shift);
    }
}
