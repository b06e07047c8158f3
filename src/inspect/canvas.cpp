#include "minivit/inspect/canvas.h"

#include <algorithm>
#include <cmath>

#include "minivit/core/error.h"
#include "minivit/core/fileio.h"

// Third-party single-header libraries: their own warnings are not ours to fix.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_easy_font.h>
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

namespace minivit {

// ---------------------------------------------------------------------------------------
// Colour map

// Viridis (matplotlib's default map, van der Walt & Smith) sampled at t = k/16; linear
// interpolation between these anchors stays within 6/255 of the full 256-entry table.
static constexpr uint8_t kViridis[17][3] = {
    {68, 1, 84},    {72, 24, 106},  {71, 45, 123},  {66, 64, 134},  {59, 82, 139},
    {51, 99, 141},  {44, 114, 142}, {38, 129, 142}, {33, 144, 140}, {31, 159, 136},
    {40, 174, 128}, {62, 188, 116}, {93, 201, 99},  {130, 211, 76}, {171, 220, 50},
    {213, 226, 26}, {253, 231, 37}};

Color colormap(float t) {
  if (!(t > 0.f)) t = 0.f;  // also NaN
  if (t > 1.f) t = 1.f;
  float u = t * 16.f;
  int k = std::min(static_cast<int>(u), 15);
  float f = u - static_cast<float>(k);
  Color c;
  for (int i = 0; i < 3; ++i) {
    float v = kViridis[k][i] * (1.f - f) + kViridis[k + 1][i] * f;
    c[i] = static_cast<uint8_t>(std::lround(v));
  }
  return c;
}

// ---------------------------------------------------------------------------------------
// Canvas basics

Canvas::Canvas(int w, int h, Color background) {
  if (w < 0 || h < 0 || w > (1 << 15) || h > (1 << 15) || int64_t(w) * h > (int64_t(1) << 26))
    throw Error("canvas size " + std::to_string(w) + "x" + std::to_string(h) +
                " is out of range");
  width = w;
  height = h;
  rgb.resize(size_t(w) * h * 3);
  fill(background);
}

void Canvas::put(int x, int y, Color c, float alpha) {
  if (x < 0 || y < 0 || x >= width || y >= height || !(alpha > 0.f)) return;
  uint8_t* p = &rgb[(size_t(y) * width + x) * 3];
  if (alpha >= 1.f) {
    p[0] = c[0], p[1] = c[1], p[2] = c[2];
    return;
  }
  for (int i = 0; i < 3; ++i)
    p[i] = static_cast<uint8_t>(std::lround(p[i] + (c[i] - p[i]) * alpha));
}

void Canvas::fill(Color c) {
  for (size_t i = 0; i < rgb.size(); i += 3) rgb[i] = c[0], rgb[i + 1] = c[1], rgb[i + 2] = c[2];
}

void Canvas::fill_rect(int x, int y, int w, int h, Color c) {
  int x0 = std::max(x, 0), y0 = std::max(y, 0);
  int x1 = std::min<int64_t>(int64_t(x) + w, width), y1 = std::min<int64_t>(int64_t(y) + h, height);
  for (int yy = y0; yy < y1; ++yy) {
    uint8_t* p = &rgb[(size_t(yy) * width + x0) * 3];
    for (int xx = x0; xx < x1; ++xx, p += 3) p[0] = c[0], p[1] = c[1], p[2] = c[2];
  }
}

void Canvas::draw_rect(int x, int y, int w, int h, Color c, int thickness) {
  int t = std::max(1, std::min({thickness, (w + 1) / 2, (h + 1) / 2}));
  fill_rect(x, y, w, t, c);
  fill_rect(x, y + h - t, w, t, c);
  fill_rect(x, y + t, t, h - 2 * t, c);
  fill_rect(x + w - t, y + t, t, h - 2 * t, c);
}

// Coverage of pixel centres within distance d of the shape's core: full inside
// `half` - 0.5, fading linearly to nothing at `half` + 0.5.
static float coverage(float d, float half) { return std::clamp(half + 0.5f - d, 0.f, 1.f); }

void Canvas::draw_line(float x0, float y0, float x1, float y1, Color c, float thickness) {
  if (!std::isfinite(x0) || !std::isfinite(y0) || !std::isfinite(x1) || !std::isfinite(y1))
    return;
  float half = std::max(thickness, 0.5f) * 0.5f;
  int bx0 = std::max(0, static_cast<int>(std::floor(std::min(x0, x1) - half - 1)));
  int by0 = std::max(0, static_cast<int>(std::floor(std::min(y0, y1) - half - 1)));
  int bx1 = std::min(width - 1, static_cast<int>(std::ceil(std::max(x0, x1) + half + 1)));
  int by1 = std::min(height - 1, static_cast<int>(std::ceil(std::max(y0, y1) + half + 1)));
  float dx = x1 - x0, dy = y1 - y0;
  float len2 = dx * dx + dy * dy;
  for (int y = by0; y <= by1; ++y)
    for (int x = bx0; x <= bx1; ++x) {
      // distance from the pixel centre to the segment
      float px = x - x0, py = y - y0;
      float s = len2 > 0.f ? std::clamp((px * dx + py * dy) / len2, 0.f, 1.f) : 0.f;
      float ex = px - s * dx, ey = py - s * dy;
      put(x, y, c, coverage(std::sqrt(ex * ex + ey * ey), half));
    }
}

void Canvas::fill_circle(float cx, float cy, float radius, Color c) {
  if (!std::isfinite(cx) || !std::isfinite(cy) || !(radius > 0.f)) return;
  int bx0 = std::max(0, static_cast<int>(std::floor(cx - radius - 1)));
  int by0 = std::max(0, static_cast<int>(std::floor(cy - radius - 1)));
  int bx1 = std::min(width - 1, static_cast<int>(std::ceil(cx + radius + 1)));
  int by1 = std::min(height - 1, static_cast<int>(std::ceil(cy + radius + 1)));
  for (int y = by0; y <= by1; ++y)
    for (int x = bx0; x <= bx1; ++x) {
      float d = std::hypot(x - cx, y - cy);
      put(x, y, c, std::clamp(radius + 0.5f - d, 0.f, 1.f));
    }
}

// ---------------------------------------------------------------------------------------
// Text

// stb_easy_font indexes a table by (char - 32) and takes a mutable C string.
static std::string printable(std::string_view text) {
  std::string s(text);
  for (char& ch : s)
    if (ch != '\n' && (ch < 32 || ch > 126)) ch = '?';
  return s;
}

int text_width(std::string_view text, int scale) {
  std::string s = printable(text);
  return stb_easy_font_width(s.data()) * std::max(scale, 1);
}

void Canvas::draw_text(int x, int y, std::string_view text, Color c, int scale) {
  if (text.empty()) return;
  scale = std::max(scale, 1);
  std::string s = printable(text);
  // Each quad is 4 vertices of 16 bytes (x, y, z floats and a colour); grow the buffer
  // until the whole string fits (the font never needs more than ~270 bytes a character).
  std::vector<char> buf(s.size() * 512 + 64);
  int quads;
  for (;;) {
    quads = stb_easy_font_print(0.f, 0.f, s.data(), nullptr, buf.data(), static_cast<int>(buf.size()));
    if (size_t(quads) * 64 + 64 <= buf.size()) break;
    buf.resize(buf.size() * 2);
  }
  for (int q = 0; q < quads; ++q) {
    const float* v0 = reinterpret_cast<const float*>(buf.data() + q * 64);       // top-left
    const float* v2 = reinterpret_cast<const float*>(buf.data() + q * 64 + 32);  // bottom-right
    int qx = static_cast<int>(std::lround(v0[0])), qy = static_cast<int>(std::lround(v0[1]));
    int qw = static_cast<int>(std::lround(v2[0])) - qx;
    int qh = static_cast<int>(std::lround(v2[1])) - qy;
    fill_rect(x + qx * scale, y + qy * scale, qw * scale, qh * scale, c);
  }
}

// ---------------------------------------------------------------------------------------
// Images and heat maps

void Canvas::blit(const Canvas& src, int x, int y) {
  int x0 = std::max(x, 0), x1 = std::min(x + src.width, width);
  if (x1 <= x0) return;
  for (int sy = 0; sy < src.height; ++sy) {
    int yy = y + sy;
    if (yy < 0 || yy >= height) continue;
    std::copy_n(src.pixel(x0 - x, sy), size_t(x1 - x0) * 3, &rgb[(size_t(yy) * width + x0) * 3]);
  }
}

// Source index for destination pixel i of n when n pixels stretch over m cells.
static int nearest_index(int i, int n, int m) {
  return std::min(static_cast<int>((int64_t(i) * 2 + 1) * m / (int64_t(n) * 2)), m - 1);
}

void Canvas::blend_heatmap(int x, int y, int w, int h, const float* values, int rows, int cols,
                           float alpha, float lo, float hi, Interp interp) {
  if (w <= 0 || h <= 0 || rows <= 0 || cols <= 0) return;
  float scale = hi > lo ? 1.f / (hi - lo) : 0.f;
  int x0 = std::max(x, 0), x1 = std::min(x + w, width);
  int y0 = std::max(y, 0), y1 = std::min(y + h, height);
  for (int py = y0; py < y1; ++py)
    for (int px = x0; px < x1; ++px) {
      float v;
      if (interp == Interp::nearest) {
        v = values[size_t(nearest_index(py - y, h, rows)) * cols + nearest_index(px - x, w, cols)];
      } else {
        // position in cell units with cell centres at integers, clamped at the borders
        float u = std::clamp((px - x + 0.5f) * cols / w - 0.5f, 0.f, float(cols - 1));
        float t = std::clamp((py - y + 0.5f) * rows / h - 0.5f, 0.f, float(rows - 1));
        int c0 = std::min(static_cast<int>(u), cols - 1), r0 = std::min(static_cast<int>(t), rows - 1);
        int c1 = std::min(c0 + 1, cols - 1), r1 = std::min(r0 + 1, rows - 1);
        float fu = u - c0, ft = t - r0;
        float top = values[size_t(r0) * cols + c0] * (1 - fu) + values[size_t(r0) * cols + c1] * fu;
        float bot = values[size_t(r1) * cols + c0] * (1 - fu) + values[size_t(r1) * cols + c1] * fu;
        v = top * (1 - ft) + bot * ft;
      }
      put(px, py, colormap((v - lo) * scale), alpha);
    }
}

void Canvas::draw_image_gray(int x, int y, int w, int h, const uint8_t* pixels, int rows,
                             int cols) {
  if (w <= 0 || h <= 0 || rows <= 0 || cols <= 0) return;
  for (int py = std::max(y, 0); py < std::min(y + h, height); ++py) {
    const uint8_t* row = pixels + size_t(nearest_index(py - y, h, rows)) * cols;
    for (int px = std::max(x, 0); px < std::min(x + w, width); ++px) {
      uint8_t g = row[nearest_index(px - x, w, cols)];
      put(px, py, {g, g, g});
    }
  }
}

void Canvas::draw_image_rgb(int x, int y, int w, int h, const uint8_t* pixels, int rows,
                            int cols, bool interleaved) {
  if (w <= 0 || h <= 0 || rows <= 0 || cols <= 0) return;
  size_t plane = size_t(rows) * cols;
  for (int py = std::max(y, 0); py < std::min(y + h, height); ++py) {
    size_t r = nearest_index(py - y, h, rows);
    for (int px = std::max(x, 0); px < std::min(x + w, width); ++px) {
      size_t i = r * cols + nearest_index(px - x, w, cols);
      if (interleaved)
        put(px, py, {pixels[i * 3], pixels[i * 3 + 1], pixels[i * 3 + 2]});
      else
        put(px, py, {pixels[i], pixels[plane + i], pixels[2 * plane + i]});
    }
  }
}

// ---------------------------------------------------------------------------------------
// PNG

static void append_bytes(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), size_t(size));
}

std::string encode_png(const Canvas& canvas) {
  if (canvas.width <= 0 || canvas.height <= 0)
    throw Error("cannot encode an empty " + std::to_string(canvas.width) + "x" +
                std::to_string(canvas.height) + " image as PNG");
  std::string out;
  if (!stbi_write_png_to_func(append_bytes, &out, canvas.width, canvas.height, 3,
                              canvas.rgb.data(), canvas.width * 3))
    throw Error("PNG encoding failed");
  return out;
}

void write_png(const std::string& path, const Canvas& canvas) {
  write_file_atomic(path, encode_png(canvas));
}

}  // namespace minivit
