#include "minivit/data/trivial_augment.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

namespace minivit {

namespace {

constexpr double kPi = 3.14159265358979323846;

// torch.linspace(from, to, 31)[bin]
float bin_value(float from, float to, int bin) {
  return from + (to - from) * float(bin) / float(kTrivialBins - 1);
}

// The value of a float expression stored into 8 bits as torch stores it: clamped to
// [0, 255], then truncated.
uint8_t to_pixel(float v) { return uint8_t(std::clamp(v, 0.0f, 255.0f)); }

// out(X, Y) = in(map(X, Y)) for pixel centres X = x + 0.5, Y = y + 0.5 measured from the
// top-left corner; the nearest input pixel (ties to even, as grid_sample rounds), 0 outside.
template <class Map>
void resample(uint8_t* image, int C, int H, int W, uint8_t* scratch, Map map) {
  const int64_t plane = int64_t(H) * W;
  std::memcpy(scratch, image, size_t(C * plane));
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      const auto [sx, sy] = map(x + 0.5, y + 0.5);
      const double ix = std::nearbyint(sx - 0.5), iy = std::nearbyint(sy - 0.5);
      const bool inside = ix >= 0 && ix < W && iy >= 0 && iy < H;
      const int64_t from = inside ? int64_t(iy) * W + int64_t(ix) : 0;
      for (int c = 0; c < C; ++c)
        image[c * plane + int64_t(y) * W + x] = inside ? scratch[c * plane + from] : 0;
    }
}

// torchvision's rgb_to_grayscale of 8-bit pixels: 0.2989 R + 0.587 G + 0.114 B, truncated.
uint8_t grey_of(const uint8_t* image, int64_t plane, int64_t i) {
  return to_pixel(0.2989f * float(image[i]) + 0.587f * float(image[plane + i]) +
                  0.114f * float(image[2 * plane + i]));
}

// torchvision's _blend: factor * image + (1 - factor) * other, as 8 bits.
uint8_t blend(uint8_t pixel, float other, float factor) {
  return to_pixel(factor * float(pixel) + (1.0f - factor) * other);
}

void adjust_brightness(uint8_t* image, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) image[i] = blend(image[i], 0.0f, factor);
}

void adjust_saturation(uint8_t* image, int C, int64_t plane, float factor) {
  if (C != 3) return;  // torchvision leaves a grey image as it is
  for (int64_t i = 0; i < plane; ++i) {
    const float grey = float(grey_of(image, plane, i));
    for (int c = 0; c < 3; ++c) image[c * plane + i] = blend(image[c * plane + i], grey, factor);
  }
}

void adjust_contrast(uint8_t* image, int C, int64_t plane, float factor) {
  double sum = 0.0;
  for (int64_t i = 0; i < plane; ++i)
    sum += C == 3 ? double(grey_of(image, plane, i)) : double(image[i]);
  const float mean = float(sum / double(plane));
  for (int64_t i = 0; i < C * plane; ++i) image[i] = blend(image[i], mean, factor);
}

// Blend with the image smoothed by [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13, rounded; the
// border pixels keep their values (PIL's SMOOTH filter, as torchvision's adjust_sharpness).
void adjust_sharpness(uint8_t* image, int C, int H, int W, float factor, uint8_t* scratch) {
  if (H <= 2 || W <= 2) return;
  const int64_t plane = int64_t(H) * W;
  std::memcpy(scratch, image, size_t(C * plane));
  for (int c = 0; c < C; ++c)
    for (int y = 1; y < H - 1; ++y)
      for (int x = 1; x < W - 1; ++x) {
        const uint8_t* p = scratch + c * plane + int64_t(y) * W + x;
        float sum = 0.0f;
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx)
            sum += float(p[dy * W + dx]) * ((dy == 0 && dx == 0) ? 5.0f : 1.0f) / 13.0f;
        image[c * plane + int64_t(y) * W + x] = blend(*p, std::nearbyint(sum), factor);
      }
}

void auto_contrast(uint8_t* image, int C, int64_t plane) {
  for (int c = 0; c < C; ++c) {
    uint8_t* p = image + c * plane;
    const auto [lo, hi] = std::minmax_element(p, p + plane);
    if (*lo == *hi) continue;
    const float low = float(*lo), scale = 255.0f / (float(*hi) - low);
    for (int64_t i = 0; i < plane; ++i) p[i] = to_pixel((float(p[i]) - low) * scale);
  }
}

// torchvision's equalize of one channel (PIL's ImageOps.equalize): the cumulative histogram
// spread over the levels in steps of (pixels not at the highest level present) / 255.
void equalize(uint8_t* image, int C, int64_t plane) {
  for (int c = 0; c < C; ++c) {
    uint8_t* p = image + c * plane;
    std::array<int64_t, 256> hist{};
    for (int64_t i = 0; i < plane; ++i) ++hist[p[i]];
    int top = 255;
    while (hist[size_t(top)] == 0) --top;
    const int64_t step = (plane - hist[size_t(top)]) / 255;
    if (step == 0) continue;
    std::array<uint8_t, 256> lut{};
    int64_t cumulative = 0;
    for (int v = 0; v < 255; ++v) {
      cumulative += hist[size_t(v)];
      lut[size_t(v + 1)] = uint8_t(std::min<int64_t>(255, (cumulative + step / 2) / step));
    }
    for (int64_t i = 0; i < plane; ++i) p[i] = lut[p[i]];
  }
}

}  // namespace

TrivialDraw trivial_draw(TrivialOp op, int bin, bool negative) {
  TrivialDraw draw;
  draw.op = op;
  const float sign = negative ? -1.0f : 1.0f;
  switch (op) {
    case TrivialOp::identity:
    case TrivialOp::auto_contrast:
    case TrivialOp::equalize:
      break;
    case TrivialOp::shear_x:
    case TrivialOp::shear_y:
    case TrivialOp::brightness:
    case TrivialOp::color:
    case TrivialOp::contrast:
    case TrivialOp::sharpness:
      draw.magnitude = sign * bin_value(0.0f, 0.99f, bin);
      break;
    case TrivialOp::translate_x:
    case TrivialOp::translate_y:
      draw.magnitude = sign * bin_value(0.0f, 32.0f, bin);
      break;
    case TrivialOp::rotate:
      draw.magnitude = sign * bin_value(0.0f, 135.0f, bin);
      break;
    case TrivialOp::posterize:  // 8 - round(bin / 5), ties to even as torch.round
      draw.magnitude = 8.0f - std::nearbyint(float(bin) / 5.0f);
      break;
    case TrivialOp::solarize:
      draw.magnitude = bin_value(255.0f, 0.0f, bin);
      break;
  }
  return draw;
}

void apply_trivial_augment(uint8_t* image, int C, int H, int W, const TrivialDraw& draw,
                           uint8_t* scratch) {
  const int64_t plane = int64_t(H) * W, n = C * plane;
  const double m = draw.magnitude;
  struct Point {
    double x, y;
  };
  switch (draw.op) {
    case TrivialOp::identity:
      return;
    case TrivialOp::shear_x:
      return resample(image, C, H, W, scratch, [m](double X, double Y) { return Point{X + m * Y, Y}; });
    case TrivialOp::shear_y:
      return resample(image, C, H, W, scratch, [m](double X, double Y) { return Point{X, Y + m * X}; });
    case TrivialOp::translate_x: {
      const double t = std::trunc(m);
      return resample(image, C, H, W, scratch, [t](double X, double Y) { return Point{X - t, Y}; });
    }
    case TrivialOp::translate_y: {
      const double t = std::trunc(m);
      return resample(image, C, H, W, scratch, [t](double X, double Y) { return Point{X, Y - t}; });
    }
    case TrivialOp::rotate: {
      // Counter-clockwise on screen (y grows downwards) about the image's centre.
      const double cs = std::cos(m * kPi / 180.0), sn = std::sin(m * kPi / 180.0);
      const double cx = 0.5 * W, cy = 0.5 * H;
      return resample(image, C, H, W, scratch, [=](double X, double Y) {
        const double x = X - cx, y = Y - cy;
        return Point{cs * x - sn * y + cx, sn * x + cs * y + cy};
      });
    }
    case TrivialOp::brightness:
      return adjust_brightness(image, n, 1.0f + draw.magnitude);
    case TrivialOp::color:
      return adjust_saturation(image, C, plane, 1.0f + draw.magnitude);
    case TrivialOp::contrast:
      return adjust_contrast(image, C, plane, 1.0f + draw.magnitude);
    case TrivialOp::sharpness:
      return adjust_sharpness(image, C, H, W, 1.0f + draw.magnitude, scratch);
    case TrivialOp::posterize: {
      const uint8_t mask = uint8_t(0xFF << (8 - int(draw.magnitude)));
      for (int64_t i = 0; i < n; ++i) image[i] &= mask;
      return;
    }
    case TrivialOp::solarize:
      for (int64_t i = 0; i < n; ++i)
        if (float(image[i]) >= draw.magnitude) image[i] = uint8_t(255 - image[i]);
      return;
    case TrivialOp::auto_contrast:
      return auto_contrast(image, C, plane);
    case TrivialOp::equalize:
      return equalize(image, C, plane);
  }
}

}  // namespace minivit
