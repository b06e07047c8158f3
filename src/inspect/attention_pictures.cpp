// The pictures and the page `minivit attention` writes: the input, the per-head grid, the
// rollout and index.html, drawn from the maps and the summary of attention_maps.cpp.
#include <algorithm>
#include <cmath>

#include "minivit/core/progress.h"
#include "minivit/inspect/attention_maps.h"

namespace minivit {

static const Color kInk = {20, 20, 20};
static const Color kMuted = {100, 100, 100};
static const Color kMark = {230, 40, 40};  // not in viridis, so it stands out on any tile

// A side for showing an S x S image: a whole multiple of S near `target` (so every input
// pixel and every patch covers the same number of screen pixels), or `target` itself when
// the image is larger.
static int display_side(int S, int target) {
  if (S >= target) return target;
  return S * ((target + S / 2) / S);
}

static void draw_image(Canvas& canvas, int x, int y, int side, const Image8& image) {
  const int C = int(image.shape(0)), S = int(image.shape(1));
  if (C >= 3)
    canvas.draw_image_rgb(x, y, side, side, image.data(), S, S);
  else
    canvas.draw_image_gray(x, y, side, side, image.data(), S, S);
}

// A horizontal viridis bar, low on the left.
static void draw_colorbar(Canvas& canvas, int x, int y, int w, int h) {
  for (int i = 0; i < w; ++i)
    canvas.fill_rect(x + i, y, 1, h, colormap(w > 1 ? float(i) / float(w - 1) : 0.f));
  canvas.draw_rect(x - 1, y - 1, w + 2, h + 2, kMuted);
}

// The heat map of one (G, G) map over the image at (x, y, side, side), scaled to its own
// min..max, with the largest cell outlined.
static void draw_overlay(Canvas& canvas, int x, int y, int side, const Image8& image,
                         const float* map, int G) {
  draw_image(canvas, x, y, side, image);
  // Darken the image first: under a translucent colour map a bright object would otherwise
  // tint the least-attended colour towards the middle of the scale and read as attention.
  for (int py = y; py < y + side; ++py)
    for (int px = x; px < x + side; ++px) canvas.put(px, py, {0, 0, 0}, 0.45f);
  const auto [lo, hi] = std::minmax_element(map, map + G * G);
  canvas.blend_heatmap(x, y, side, side, map, G, G, 0.75f, *lo, *hi, Interp::nearest);
  if (*hi - *lo <= 1e-6f * *hi) return;  // uniform: no patch stands out, so box none
  const int best = int(hi - map);
  const int x0 = x + (best % G) * side / G, x1 = x + (best % G + 1) * side / G;
  const int y0 = y + (best / G) * side / G, y1 = y + (best / G + 1) * side / G;
  canvas.draw_rect(x0, y0, x1 - x0, y1 - y0, kMark, std::max(1, side / 100));
}

static std::string fixed(double v, int digits) { return strprintf("%.*f", digits, v); }

Canvas render_input(const Image8& image, int min_side) {
  const int S = int(image.shape(1));
  const int side = S * std::max(1, (min_side + S - 1) / S);
  Canvas canvas(side, side);
  draw_image(canvas, 0, 0, side, image);
  return canvas;
}

// The two legend lines under the title of grid.png.
static std::vector<std::string> grid_legend(int G, PoolKind pool) {
  const char* looks = pool == PoolKind::cls    ? "where the CLS token looks"
                      : pool == PoolKind::mean ? "where the tokens look on average (no CLS token)"
                                               : "where the tokens look, weighted as the pooling reads them";
  return {strprintf("Row = layer, column = head. Each tile: %s among the %dx%d patches.", looks, G, G),
          "Colour scaled per tile from its least to its most attended patch; red box = top patch."};
}
constexpr int kMargin = 16;
constexpr int kColorbarWidth = 100;

GridLayout grid_layout(int layers, int heads, int grid, int image_size, PoolKind pool,
                       const std::string& title) {
  int label_w = 0;
  for (int l = 0; l < layers; ++l) label_w = std::max(label_w, text_width("layer " + std::to_string(l), 2));
  int legend_w = 0;
  for (const std::string& line : grid_legend(grid, pool)) legend_w = std::max(legend_w, text_width(line));
  const int gap = 10, caption = 16;
  GridLayout g;
  g.tile = display_side(image_size, 140);
  g.left = kMargin + label_w + 8;
  // title, two legend lines, head labels
  g.top = kMargin + 2 * kTextLineHeight + 6 + 2 * kTextLineHeight + 10 + 2 * kTextLineHeight;
  g.step_x = g.tile + gap;
  g.step_y = g.tile + caption + gap;
  g.width = std::max({g.left + heads * g.step_x - gap + kMargin, 2 * kMargin + text_width(title, 2),
                      kMargin + legend_w + 24 + text_width("least most") + kColorbarWidth + 20 + kMargin});
  g.height = g.top + layers * g.step_y - gap + kMargin;
  return g;
}

Canvas render_grid(const Image8& image, const Tensor4& att, const Readout& readout,
                   const std::string& title) {
  const PoolKind pool = readout.pool;
  const int L = int(att.shape(0)), H = int(att.shape(1)), T = int(att.shape(2));
  const int G = int(std::lround(std::sqrt(double(pool == PoolKind::cls ? T - 1 : T))));
  const int S = int(image.shape(1));
  const GridLayout g = grid_layout(L, H, G, S, pool, title);
  Canvas canvas(g.width, g.height);

  int y = kMargin;
  canvas.draw_text(kMargin, y, title, kInk, 2);
  y += 2 * kTextLineHeight + 6;
  const std::vector<std::string> legend = grid_legend(G, pool);
  int legend_w = 0;
  for (size_t i = 0; i < legend.size(); ++i) {
    canvas.draw_text(kMargin, y + int(i) * kTextLineHeight, legend[i], kMuted);
    legend_w = std::max(legend_w, text_width(legend[i]));
  }
  const int bar_x = kMargin + legend_w + 24;
  canvas.draw_text(bar_x, y + 5, "least", kMuted);
  draw_colorbar(canvas, bar_x + text_width("least") + 4, y + 4, kColorbarWidth, 12);
  canvas.draw_text(bar_x + text_width("least") + kColorbarWidth + 10, y + 5, "most", kMuted);

  for (int h = 0; h < H; ++h) {
    const std::string label = "head " + std::to_string(h);
    canvas.draw_text(g.tile_x(h) + (g.tile - text_width(label, 2)) / 2, g.top - 2 * kTextLineHeight, label, kInk, 2);
  }
  for (int l = 0; l < L; ++l) {
    canvas.draw_text(kMargin, g.tile_y(l) + g.tile / 2 - kTextCapHeight, "layer " + std::to_string(l), kInk, 2);
    for (int h = 0; h < H; ++h) {
      const std::vector<float> map = readout_attention(att, readout, l, h);
      draw_overlay(canvas, g.tile_x(h), g.tile_y(l), g.tile, image, map.data(), G);
      const float top = *std::max_element(map.begin(), map.end());
      canvas.draw_text(g.tile_x(h), g.tile_y(l) + g.tile + 3, "max " + fixed(top, 3), kMuted);
    }
  }
  return canvas;
}

Canvas render_rollout(const Image8& image, const Tensor2& rollout, PoolKind pool,
                      const std::string& title, const std::string& note) {
  const int G = int(rollout.shape(0)), S = int(image.shape(1));
  const int side = display_side(S, 280);
  const int gap = 24;
  const int x1 = kMargin, x2 = kMargin + side + gap;
  const int width = std::max({x2 + side + kMargin, 2 * kMargin + text_width(title, 2),
                              x2 + text_width(note) + kMargin});
  const int label_y = kMargin + 2 * kTextLineHeight + 8;
  const int y = label_y + 2 * kTextLineHeight;
  const int bar_y = y + side + 12;
  const int height = bar_y + 16 + 2 * kTextLineHeight + kMargin;
  Canvas canvas(width, height);
  canvas.draw_text(kMargin, kMargin, title, kInk, 2);
  canvas.draw_text(x1, label_y, "input", kInk, 2);
  canvas.draw_text(x2, label_y, "attention rollout", kInk, 2);
  draw_image(canvas, x1, y, side, image);
  draw_overlay(canvas, x2, y, side, image, rollout.data(), G);

  const auto [lo, hi] = std::minmax_element(rollout.data(), rollout.data() + rollout.size());
  const std::string lo_text = fixed(*lo, 4), hi_text = fixed(*hi, 4);
  canvas.draw_text(x2, bar_y + 3, lo_text, kMuted);
  const int bar_x = x2 + text_width(lo_text) + 4;
  const int bar_w = std::max(40, side - 2 * (text_width(hi_text) + 4));
  draw_colorbar(canvas, bar_x, bar_y + 2, bar_w, 12);
  canvas.draw_text(bar_x + bar_w + 6, bar_y + 3, hi_text, kMuted);
  canvas.draw_text(x2, bar_y + 20,
                   pool == PoolKind::cls    ? "share of the CLS output flowing from each patch"
                   : pool == PoolKind::mean ? "share of the mean token output flowing from each patch"
                                            : "share of the pooled output flowing from each patch",
                   kMuted);
  canvas.draw_text(x2, bar_y + 20 + kTextLineHeight, note, kMuted);
  return canvas;
}

}  // namespace minivit
