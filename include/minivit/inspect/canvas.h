#pragma once
// A small RGB raster for the pictures minivit writes: training curves, attention heat maps
// and image grids. Coordinates are pixels, x rightwards and y downwards, (0, 0) the top-left
// pixel; everything drawn is clipped to the canvas. Text comes from stb_easy_font, a tiny
// vector font of axis-aligned strokes, drawn at an integer scale so it stays crisp.
//
//   Canvas c(400, 300);                        // white
//   c.draw_line(10, 10, 390, 290, {0, 0, 0}, 2);
//   c.draw_text(20, 20, "loss", {0, 0, 0}, 2);
//   write_png("out.png", c);                   // atomic: whole file or none
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace minivit {

using Color = std::array<uint8_t, 3>;  // r, g, b

// Perceptual colour map (viridis: dark purple -> blue -> green -> yellow, lightness rising
// monotonically) for t in [0, 1]; t is clamped, NaN maps to 0.
Color colormap(float t);

enum class Interp { nearest, bilinear };

// Font metrics at scale 1 (multiply by the scale): a line advances 12 pixels; capitals and
// digits fill the top 7 rows of it and descenders reach down to row 8.
constexpr int kTextLineHeight = 12;
constexpr int kTextCapHeight = 7;

// Width in pixels that draw_text(text, scale) advances (the widest line for multi-line
// text). It includes the gap after the last character, usually 2 font pixels.
int text_width(std::string_view text, int scale = 1);

struct Canvas {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // (height, width, 3) row-major

  Canvas() = default;
  // Throws minivit::Error if a side is negative or the canvas would be absurdly large.
  Canvas(int width, int height, Color background = {255, 255, 255});

  const uint8_t* pixel(int x, int y) const { return &rgb[(size_t(y) * width + x) * 3]; }
  Color get(int x, int y) const {
    const uint8_t* p = pixel(x, y);
    return {p[0], p[1], p[2]};
  }
  // Sets one pixel; `alpha` in [0, 1] blends over what is there. Outside: ignored.
  void put(int x, int y, Color c, float alpha = 1.f);

  void fill(Color c);
  void fill_rect(int x, int y, int w, int h, Color c);
  // Outline of the rectangle, `thickness` pixels drawn inward.
  void draw_rect(int x, int y, int w, int h, Color c, int thickness = 1);
  // A segment between pixel centres (x0, y0) and (x1, y1), `thickness` pixels wide with
  // round caps and a one-pixel soft edge.
  void draw_line(float x0, float y0, float x1, float y1, Color c, float thickness = 1.f);
  // A disc centred on (cx, cy) with a soft edge.
  void fill_circle(float cx, float cy, float radius, Color c);
  // Text with its top-left corner at (x, y); '\n' starts a new line. Characters outside
  // printable ASCII are drawn as '?'. Every stroke is a scale x scale block per font pixel.
  void draw_text(int x, int y, std::string_view text, Color c, int scale = 1);

  // Copies `src` with its top-left corner at (x, y).
  void blit(const Canvas& src, int x, int y);

  // Paints the (rows, cols) map `values` (row-major) stretched over the rectangle
  // (x, y, w, h): each value v becomes colormap((v - lo) / (hi - lo)) and is blended over
  // the canvas with opacity `alpha`. Bilinear interpolates between cell centres; nearest
  // gives hard cell edges. hi <= lo maps everything to the bottom of the colour map.
  void blend_heatmap(int x, int y, int w, int h, const float* values, int rows, int cols,
                     float alpha, float lo, float hi, Interp interp = Interp::bilinear);

  // Draws a (rows, cols) uint8 image scaled nearest-neighbour onto (x, y, w, h).
  void draw_image_gray(int x, int y, int w, int h, const uint8_t* pixels, int rows, int cols);
  // Same for colour: `pixels` planar (3, rows, cols) as Dataset keeps images, or
  // interleaved (rows, cols, 3) as image files decode, when `interleaved`.
  void draw_image_rgb(int x, int y, int w, int h, const uint8_t* pixels, int rows, int cols,
                      bool interleaved = false);
};

// The canvas as PNG file bytes.
std::string encode_png(const Canvas& canvas);

// Writes the canvas as a PNG through write_file_atomic. Throws minivit::Error naming the
// path on failure.
void write_png(const std::string& path, const Canvas& canvas);

}  // namespace minivit
