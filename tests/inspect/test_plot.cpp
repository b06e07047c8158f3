// Canvas drawing, PNG output and the training-curves plot.
#include <catch2/catch.hpp>

#include <stb/stb_image.h>  // the implementation is compiled elsewhere in the project

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "minivit/core/error.h"
#include "minivit/inspect/canvas.h"
#include "minivit/inspect/plot.h"
#include "test_util.h"

using namespace minivit;

namespace {

constexpr Color kBlack = {0, 0, 0};
constexpr Color kWhite = {255, 255, 255};

struct Decoded {
  int w = 0, h = 0, channels = 0;
  std::vector<uint8_t> rgb;
};

Decoded decode_png_bytes(const std::string& bytes) {
  Decoded d;
  unsigned char* p = stbi_load_from_memory(reinterpret_cast<const unsigned char*>(bytes.data()),
                                           static_cast<int>(bytes.size()), &d.w, &d.h,
                                           &d.channels, 3);
  REQUIRE(p != nullptr);
  d.rgb.assign(p, p + size_t(d.w) * d.h * 3);
  stbi_image_free(p);
  return d;
}

Decoded decode_png_file(const std::string& path) {
  Decoded d;
  unsigned char* p = stbi_load(path.c_str(), &d.w, &d.h, &d.channels, 3);
  REQUIRE(p != nullptr);
  d.rgb.assign(p, p + size_t(d.w) * d.h * 3);
  stbi_image_free(p);
  return d;
}

bool is_dark(const Canvas& c, int x, int y) { return c.get(x, y)[0] < 128; }

float luminance(Color c) { return 0.299f * c[0] + 0.587f * c[1] + 0.114f * c[2]; }

// How many pixels are close to `color` (each channel within `tol`).
int count_color(const Decoded& d, Color color, int tol) {
  int n = 0;
  for (size_t i = 0; i < d.rgb.size(); i += 3)
    if (std::abs(d.rgb[i] - color[0]) <= tol && std::abs(d.rgb[i + 1] - color[1]) <= tol &&
        std::abs(d.rgb[i + 2] - color[2]) <= tol)
      ++n;
  return n;
}

// The plot area's frame as the axes draw it in columns [x0, x1): the left axis is the
// longest vertical run of the axes' grey, the bottom axis the longest horizontal one. Tick
// marks are 5 pixels long, so one that meets an axis lengthens that axis's run beyond the
// frame's corner but moves neither the corner nor the axis's other end.
struct Frame {
  int left = -1, top = -1, right = -1, bottom = -1;
};

Frame find_frame(const Canvas& c, int x0, int x1) {
  Frame f;
  int longest = 0;
  for (int x = x0; x < x1; ++x)
    for (int y = 0, run = 0; y < c.height; ++y) {
      run = c.get(x, y) == kPlotAxis ? run + 1 : 0;
      if (run > longest) {
        longest = run;
        f.left = x;
        f.top = y - run + 1;
      }
    }
  longest = 0;
  for (int y = 0; y < c.height; ++y)
    for (int x = x0, run = 0; x < x1; ++x) {
      run = c.get(x, y) == kPlotAxis ? run + 1 : 0;
      if (run > longest) {
        longest = run;
        f.right = x;
        f.bottom = y;
      }
    }
  return f;
}

std::vector<std::string> dir_listing(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  return names;
}

}  // namespace

TEST_CASE("colormap runs from dark purple to yellow with rising lightness", "[plot]") {
  CHECK(colormap(0.f) == Color{68, 1, 84});
  CHECK(colormap(1.f) == Color{253, 231, 37});
  CHECK(colormap(0.5f) == Color{33, 144, 140});
  CHECK(colormap(-3.f) == colormap(0.f));
  CHECK(colormap(7.f) == colormap(1.f));
  CHECK(colormap(NAN) == colormap(0.f));
  for (int i = 1; i <= 100; ++i)
    CHECK(luminance(colormap(i / 100.f)) > luminance(colormap((i - 1) / 100.f)));
}

TEST_CASE("canvas starts filled and clips drawing at its edges", "[plot]") {
  Canvas c(20, 10, {1, 2, 3});
  CHECK(c.rgb.size() == 20 * 10 * 3);
  CHECK(c.get(19, 9) == Color{1, 2, 3});
  c.fill_rect(-5, -5, 10, 10, kBlack);  // partly outside
  CHECK(c.get(0, 0) == kBlack);
  CHECK(c.get(4, 4) == kBlack);
  CHECK(c.get(5, 5) == Color{1, 2, 3});
  c.draw_line(-100, 3, 100, 3, kWhite, 1);
  for (int x = 0; x < 20; ++x) CHECK(c.get(x, 3) == kWhite);
  c.fill_rect(18, 8, 1000, 1000, kWhite);
  CHECK(c.get(19, 9) == kWhite);
  CHECK_THROWS_AS(Canvas(-1, 5), Error);
}

TEST_CASE("draw_line covers the segment and nothing far from it", "[plot]") {
  Canvas c(40, 40, kWhite);
  c.draw_line(5, 5, 34, 34, kBlack, 3);
  for (int i = 5; i <= 34; ++i) CHECK(c.get(i, i) == kBlack);
  for (int y = 0; y < 40; ++y)
    for (int x = 0; x < 40; ++x)
      if (std::abs(x - y) > 3) CHECK(c.get(x, y) == kWhite);
}

TEST_CASE("draw_text puts ink exactly where the glyph strokes are", "[plot]") {
  SECTION("'|' is one font pixel wide and 7 tall, scaled to a block") {
    Canvas c(40, 40, kWhite);
    c.draw_text(20, 10, "|", kBlack, 2);
    for (int y = 0; y < 40; ++y)
      for (int x = 0; x < 40; ++x) {
        bool inside = x >= 20 && x < 22 && y >= 10 && y < 10 + 2 * kTextCapHeight;
        INFO("x=" << x << " y=" << y);
        CHECK(is_dark(c, x, y) == inside);
      }
  }
  SECTION("'-' is a horizontal bar through the middle") {
    Canvas c(40, 40, kWhite);
    c.draw_text(5, 5, "-", kBlack, 3);
    for (int y = 0; y < 40; ++y)
      for (int x = 0; x < 40; ++x) {
        bool inside = x >= 5 && x < 5 + 4 * 3 && y >= 5 + 3 * 3 && y < 5 + 4 * 3;
        INFO("x=" << x << " y=" << y);
        CHECK(is_dark(c, x, y) == inside);
      }
  }
  SECTION("longer text stays in its box, and scale 2 is scale 1 doubled") {
    const std::string s = "Epoch 10: loss=0.25 (gj)";
    Canvas one(200, 20, kWhite), two(400, 40, kWhite);
    one.draw_text(0, 0, s, kBlack, 1);
    two.draw_text(0, 0, s, kBlack, 2);
    CHECK(text_width(s, 2) == 2 * text_width(s, 1));
    int inked = 0;
    for (int y = 0; y < 20; ++y)
      for (int x = 0; x < 200; ++x) {
        bool dark = is_dark(one, x, y);
        inked += dark;
        if (dark) {
          CHECK(x < text_width(s, 1));
          CHECK(y < kTextLineHeight);
        }
        for (int dy = 0; dy < 2; ++dy)
          for (int dx = 0; dx < 2; ++dx) CHECK(is_dark(two, 2 * x + dx, 2 * y + dy) == dark);
      }
    CHECK(inked > 100);
  }
  SECTION("text in a colour, off-canvas and unprintable characters are harmless") {
    Canvas c(30, 20, kWhite);
    c.draw_text(2, 2, "a\tb\xff\n\x01", {200, 0, 0}, 1);
    c.draw_text(-500, -500, "far away", kBlack, 4);
    c.draw_text(25, 15, "clipped", kBlack, 2);
    bool red = false;
    for (int y = 0; y < 20; ++y)
      for (int x = 0; x < 30; ++x) red |= c.get(x, y) == Color{200, 0, 0};
    CHECK(red);
    CHECK(text_width("") == 0);
  }
}

TEST_CASE("heat map of a single peak is brightest in that cell", "[plot]") {
  const int rows = 5, cols = 7, cell = 10, x0 = 5, y0 = 3;
  std::vector<float> map(rows * cols, 0.f);
  map[2 * cols + 4] = 1.f;
  for (Interp interp : {Interp::nearest, Interp::bilinear}) {
    Canvas c(cols * cell + 10, rows * cell + 6, kBlack);
    c.blend_heatmap(x0, y0, cols * cell, rows * cell, map.data(), rows, cols, 1.f, 0.f, 1.f,
                    interp);
    float best = -1;
    int bx = -1, by = -1;
    for (int y = 0; y < c.height; ++y)
      for (int x = 0; x < c.width; ++x)
        if (luminance(c.get(x, y)) > best) best = luminance(c.get(x, y)), bx = x, by = y;
    INFO("interp " << static_cast<int>(interp) << " brightest at " << bx << "," << by);
    CHECK(bx >= x0 + 4 * cell);
    CHECK(bx < x0 + 5 * cell);
    CHECK(by >= y0 + 2 * cell);
    CHECK(by < y0 + 3 * cell);
    // near the cell centre the map is near its top (exactly so with nearest)
    CHECK(luminance(c.get(x0 + 4 * cell + cell / 2, y0 + 2 * cell + cell / 2)) >
          luminance(colormap(0.85f)));
    CHECK(c.get(x0, y0) == colormap(0.f));
    CHECK(c.get(x0 - 1, y0) == kBlack);                          // outside the rectangle
    CHECK(c.get(x0 + cols * cell, y0 + rows * cell) == kBlack);  // untouched
    if (interp == Interp::nearest) {
      // hard cell edges: the whole peak cell and nothing else is at the top of the map
      for (int y = y0; y < y0 + rows * cell; ++y)
        for (int x = x0; x < x0 + cols * cell; ++x) {
          bool in_cell = (x - x0) / cell == 4 && (y - y0) / cell == 2;
          CHECK(c.get(x, y) == (in_cell ? colormap(1.f) : colormap(0.f)));
        }
    }
  }
  SECTION("alpha blends over what is below") {
    Canvas c(10, 10, kWhite);
    float v = 0.f;
    c.blend_heatmap(0, 0, 10, 10, &v, 1, 1, 0.5f, 0.f, 1.f);
    Color low = colormap(0.f);
    for (int i = 0; i < 3; ++i) CHECK(std::abs(c.get(5, 5)[i] - (255 + low[i]) / 2.0) <= 1);
  }
}

TEST_CASE("images scale nearest-neighbour and blit copies", "[plot]") {
  const uint8_t gray[4] = {0, 50, 100, 150};  // 2x2
  Canvas c(6, 6, kWhite);
  c.draw_image_gray(1, 1, 4, 4, gray, 2, 2);
  CHECK(c.get(1, 1) == Color{0, 0, 0});
  CHECK(c.get(2, 2) == Color{0, 0, 0});
  CHECK(c.get(3, 1) == Color{50, 50, 50});
  CHECK(c.get(1, 4) == Color{100, 100, 100});
  CHECK(c.get(4, 4) == Color{150, 150, 150});
  CHECK(c.get(0, 0) == kWhite);
  CHECK(c.get(5, 5) == kWhite);

  // the same 1x2 colour image, planar and interleaved
  const uint8_t planar[6] = {10, 20, 30, 40, 50, 60};       // R: 10 20, G: 30 40, B: 50 60
  const uint8_t interleaved[6] = {10, 30, 50, 20, 40, 60};  // (10,30,50) (20,40,60)
  Canvas p(4, 2), q(4, 2);
  p.draw_image_rgb(0, 0, 4, 2, planar, 1, 2);
  q.draw_image_rgb(0, 0, 4, 2, interleaved, 1, 2, true);
  CHECK(p.rgb == q.rgb);
  CHECK(p.get(1, 1) == Color{10, 30, 50});
  CHECK(p.get(2, 0) == Color{20, 40, 60});

  Canvas big(10, 10, kWhite);
  big.blit(p, 8, -1);  // clipped on two sides
  CHECK(big.get(8, 0) == Color{10, 30, 50});
  CHECK(big.get(9, 0) == Color{10, 30, 50});
  CHECK(big.get(8, 1) == kWhite);
  CHECK(big.get(7, 0) == kWhite);
}

TEST_CASE("PNG output decodes to the canvas and leaves no temporary file", "[plot]") {
  minivit_test::TempDir dir("png");
  Canvas c(37, 23, kWhite);
  c.fill_rect(3, 4, 10, 5, {200, 30, 40});
  c.draw_text(1, 10, "ok", kBlack, 1);

  Decoded mem = decode_png_bytes(encode_png(c));
  CHECK(mem.w == 37);
  CHECK(mem.h == 23);
  CHECK(mem.rgb == c.rgb);

  std::string path = dir.str("picture.png");
  write_png(path, c);
  Decoded file = decode_png_file(path);
  CHECK(file.w == 37);
  CHECK(file.h == 23);
  CHECK(file.channels == 3);
  CHECK(file.rgb == c.rgb);
  CHECK(dir_listing(dir.path) == std::vector<std::string>{"picture.png"});

  CHECK_THROWS_AS(write_png(dir.str("missing/sub/dir.png"), c), Error);
  CHECK_THROWS_AS(encode_png(Canvas()), Error);
}

TEST_CASE("training curves plot is a readable PNG for all kinds of histories", "[plot]") {
  minivit_test::TempDir dir("curves");
  const double nan = std::nan("");
  const Color train_blue = {31, 119, 180}, val_orange = {230, 110, 0};

  SECTION("ten epochs with validation: both series drawn") {
    std::vector<EpochPoint> pts;
    for (int e = 1; e <= 10; ++e)
      pts.push_back({e, 2.0 / e, 1 - 0.5 / e, 2.2 / e, 0.95 - 0.5 / e});
    std::string path = dir.str("curves.png");
    plot_training_curves(path, pts);
    Decoded d = decode_png_file(path);
    CHECK(d.w == 900);
    CHECK(d.h == 400);
    CHECK(count_color(d, train_blue, 10) > 200);
    CHECK(count_color(d, val_orange, 10) > 200);
    CHECK(dir_listing(dir.path) == std::vector<std::string>{"curves.png"});
  }
  SECTION("no validation split: NaN val points are skipped, nothing orange") {
    std::vector<EpochPoint> pts;
    for (int e = 1; e <= 5; ++e) pts.push_back({e, 1.0 / e, 0.5 + 0.05 * e, nan, nan});
    std::string path = dir.str("noval.png");
    plot_training_curves(path, pts);
    Decoded d = decode_png_file(path);
    CHECK(d.w == 900);
    CHECK(d.h == 400);
    CHECK(count_color(d, train_blue, 10) > 100);
    CHECK(count_color(d, val_orange, 10) == 0);
  }
  SECTION("a single point, constant values, an empty history and a diverged loss") {
    std::vector<std::vector<EpochPoint>> cases = {
        {{1, 2.3, 0.1, nan, nan}},
        {{1, 0.5, 1.0, 0.5, 1.0}, {2, 0.5, 1.0, 0.5, 1.0}, {3, 0.5, 1.0, 0.5, 1.0}},
        {},
        {{1, 2.0, 0.3, 2.1, 0.3}, {2, INFINITY, 0.1, nan, 0.1}, {3, nan, nan, nan, nan}},
        {{3, 1.0, 0.5, 1.1, 0.4}, {1, 2.0, 0.2, 2.1, 0.2}, {3, 0.9, 0.6, 1.0, 0.5}},  // resumed
        {{1, 1e30, 0.0, -1e-30, 0.0}, {200000, 0.0, 1.0, 0.0, 1.0}},
    };
    for (size_t i = 0; i < cases.size(); ++i) {
      std::string path = dir.str("case" + std::to_string(i) + ".png");
      REQUIRE_NOTHROW(plot_training_curves(path, cases[i]));
      Decoded d = decode_png_file(path);
      CHECK(d.w == 900);
      CHECK(d.h == 400);
    }
  }
}

TEST_CASE("a panel's legend keeps to the title's line unless the two would overlap", "[plot]") {
  PlotSeries dots{"heads", kPlotBlue, false, false, {{1, 1.0}, {2, 2.0}}};
  PlotSeries line{"mean", kPlotOrange, true, true, {{1, 1.5}, {2, 1.0}}};
  // The legend's line and markers are the only pixels of the series' colours above the plot
  // area, whose points sit below y = 60 either way.
  auto legend_pixels_in_rows = [](const Canvas& c, int y0, int y1) {
    int n = 0;
    for (int y = y0; y < y1; ++y)
      for (int x = 0; x < c.width; ++x)
        if (c.get(x, y) == kPlotBlue || c.get(x, y) == kPlotOrange) ++n;
    return n;
  };
  // The title's line is rows 22-35 (capitals 14 pixels high, 16 above the plot's top at 52).
  const Canvas short_title = render_panels({{"loss", "x", 0, INFINITY, {dots, line}}}, 450, 400);
  CHECK(legend_pixels_in_rows(short_title, 20, 38) > 20);
  const Canvas long_title =
      render_panels({{"distance, patches, a long one", "x", 0, INFINITY, {dots, line}}}, 450, 400);
  CHECK(legend_pixels_in_rows(long_title, 20, 38) == 0);
  CHECK(legend_pixels_in_rows(long_title, 38, 62) > 20);
}

TEST_CASE("panels side by side keep their plot areas level when one legend takes its own line",
          "[plot]") {
  PlotSeries dots{"heads", kPlotBlue, false, false, {{1, 1.0}, {2, 2.0}}};
  PlotSeries line{"mean", kPlotOrange, true, true, {{1, 1.5}, {2, 1.0}}};
  const PlotPanel short_title{"loss", "x", 0, INFINITY, {dots, line}};
  const PlotPanel long_title{"distance, patches, a long one", "x", 0, INFINITY, {dots, line}};
  const Canvas alone = render_panels({short_title}, 450, 400);
  const Canvas pair = render_panels({short_title, long_title}, 900, 400);
  const int top_alone = find_frame(alone, 0, 450).top;
  CHECK(top_alone == 52);
  CHECK(find_frame(pair, 450, 900).top > top_alone);
  CHECK(find_frame(pair, 0, 450).top == find_frame(pair, 450, 900).top);
}

TEST_CASE("a panel without data says so in the middle of its plot area", "[plot]") {
  const Canvas c = render_panels({{"loss", "x", 0, INFINITY, {}}}, 450, 400);
  const Frame f = find_frame(c, 0, c.width);
  REQUIRE(f.bottom > f.top + 100);
  REQUIRE(f.right > f.left + 100);
  // The message is the only dark ink inside the frame (the grid's lines are a light grey).
  int ink_left = c.width, ink_right = -1;
  for (int y = f.top + 1; y < f.bottom; ++y)
    for (int x = f.left + 1; x < f.right; ++x)
      if (is_dark(c, x, y)) {
        ink_left = std::min(ink_left, x);
        ink_right = std::max(ink_right, x);
      }
  REQUIRE(ink_right > ink_left + 40);  // "no data" at 2x is about 80 pixels wide
  CHECK(std::abs((ink_left + ink_right) - (f.left + f.right)) <= 2);
}
