#include "minivit/inspect/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace minivit {

namespace {

constexpr int kWidth = 900, kHeight = 400;
constexpr int kFont = 2;  // text scale: 14-pixel capitals
constexpr int kCap = kTextCapHeight * kFont;  // a capital's height in pixels at that scale
constexpr int kPlotTop = 52;  // the plot area's top under the title's line
// How far below the title's line a legend's own line lies.
constexpr int kLegendLineDrop = kCap + 10;

constexpr Color kWhite = {255, 255, 255};
constexpr Color kInk = {25, 25, 25};        // titles
constexpr Color kLabel = {70, 70, 70};      // tick labels, axis label
constexpr Color kGrid = {228, 228, 228};    // grid lines

// A tick step of 1, 2 or 5 times a power of ten giving about `target` intervals.
double nice_step(double range, int target) {
  double raw = range / target;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double r = raw / mag;
  return (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
}

struct Axis {
  double lo, hi;              // the visible range
  std::vector<double> ticks;  // round values inside it
  double step;
};

// Axis over [lo, hi] with a margin so points do not sit on the frame; a zero range is
// widened so a single point or a constant series sits in the middle. Ticks are kept
// within [tick_min, tick_max] (no "104" on a percent axis).
Axis make_value_axis(double lo, double hi, double tick_min, double tick_max) {
  if (!(lo <= hi)) lo = 0, hi = 1;  // no data
  double range = hi - lo;
  if (range <= 1e-9 * std::max(1.0, std::abs(hi))) {
    double pad = std::max(std::abs(hi) * 0.05, 0.01);
    lo -= pad, hi += pad;
  } else {
    lo -= 0.07 * range, hi += 0.07 * range;
  }
  Axis a{lo, hi, {}, nice_step(hi - lo, 5)};
  for (double k = std::ceil(lo / a.step - 1e-9); k * a.step <= hi + 1e-9 * a.step; k += 1)
    if (k * a.step >= tick_min - 1e-9 * a.step && k * a.step <= tick_max + 1e-9 * a.step)
      a.ticks.push_back(k * a.step);
  return a;
}

// Epoch axis: whole-number ticks, half an interval of margin either side.
Axis make_epoch_axis(int first, int last) {
  double range = last - first;
  double pad = std::max(0.5, 0.04 * range);
  Axis a{first - pad, last + pad, {}, std::max(1.0, nice_step(std::max(range, 1.0), 6))};
  // Counting in integers: ceil of a small negative is -0.0, and its tick would read "-0".
  for (long k = std::lround(std::ceil(a.lo / a.step)); k * a.step <= a.hi; ++k)
    a.ticks.push_back(static_cast<double>(k) * a.step);
  return a;
}

std::string tick_label(double v, double step) {
  char buf[32];
  if (std::abs(v) < step * 1e-6) v = 0;  // no "-0.0"
  double big = std::abs(v);
  if (big >= 1e5 || step < 1e-4) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  } else {
    int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  }
  return buf;
}

// The width of a label's ink at kFont, without the spacing text_width counts after it.
int label_width(const std::string& s) { return text_width(s, kFont) - 2 * kFont; }

// Title-weight text: drawn twice one pixel apart.
void draw_bold(Canvas& c, int x, int y, const std::string& s, Color color) {
  c.draw_text(x, y, s, color, kFont);
  c.draw_text(x + 1, y, s, color, kFont);
}

void draw_marker(Canvas& c, double x, double y, const PlotSeries& s, float radius) {
  if (radius <= 0) return;
  if (s.square_markers) {
    int half = static_cast<int>(std::lround(radius * 0.9));
    int cx = static_cast<int>(std::lround(x)), cy = static_cast<int>(std::lround(y));
    c.fill_rect(cx - half, cy - half, 2 * half + 1, 2 * half + 1, s.color);
  } else {
    c.fill_circle(static_cast<float>(x), static_cast<float>(y), radius, s.color);
  }
}

// A panel's plot area [left, right] x [top, bottom] (inclusive pixel bounds) and its axes.
struct PlotArea {
  int left, right, top, bottom;
  Axis xa, ya;
  double px(double e) const { return left + (e - xa.lo) / (xa.hi - xa.lo) * (right - left); }
  double py(double v) const { return bottom - (v - ya.lo) / (ya.hi - ya.lo) * (bottom - top); }
};

struct DataAxes {
  Axis xa, ya;
  bool any;  // false when no series has a point
};

// The axes over every finite point of every series.
DataAxes data_axes(const PlotPanel& panel) {
  double ylo = INFINITY, yhi = -INFINITY;
  int efirst = 0, elast = 0;
  bool any = false;
  for (const PlotSeries& s : panel.series)
    for (auto [x, y] : s.xy) {
      ylo = std::min(ylo, y), yhi = std::max(yhi, y);
      int e = static_cast<int>(x);
      efirst = any ? std::min(efirst, e) : e;
      elast = any ? std::max(elast, e) : e;
      any = true;
    }
  if (!any) efirst = 1, elast = 10;
  return {make_epoch_axis(efirst, elast), make_value_axis(ylo, yhi, panel.tick_min, panel.tick_max),
          any};
}

// The grid, the frame, the tick marks and their labels, and the x axis's label.
void draw_axes(Canvas& c, const PlotArea& a, const std::vector<std::string>& ylabels,
               const std::string& xlabel) {
  // Grid, then the frame, so the frame is on top.
  for (double t : a.ya.ticks)
    c.fill_rect(a.left, static_cast<int>(std::lround(a.py(t))), a.right - a.left + 1, 1, kGrid);
  for (double t : a.xa.ticks)
    c.fill_rect(static_cast<int>(std::lround(a.px(t))), a.top, 1, a.bottom - a.top + 1, kGrid);
  c.fill_rect(a.left, a.top, 1, a.bottom - a.top + 1, kPlotAxis);
  c.fill_rect(a.left, a.bottom, a.right - a.left + 1, 1, kPlotAxis);

  // Tick marks and labels: y labels right-aligned left of the axis, x labels centred below.
  for (size_t i = 0; i < a.ya.ticks.size(); ++i) {
    int y = static_cast<int>(std::lround(a.py(a.ya.ticks[i])));
    c.fill_rect(a.left - 5, y, 5, 1, kPlotAxis);
    c.draw_text(a.left - 9 - label_width(ylabels[i]), y - kCap / 2, ylabels[i], kLabel, kFont);
  }
  for (double t : a.xa.ticks) {
    int x = static_cast<int>(std::lround(a.px(t)));
    c.fill_rect(x, a.bottom + 1, 1, 5, kPlotAxis);
    char s[32];  // x is whole numbers (epochs, layers)
    std::snprintf(s, sizeof s, "%ld", std::lround(t));
    c.draw_text(x - label_width(s) / 2, a.bottom + 10, s, kLabel, kFont);
  }
  c.draw_text((a.left + a.right) / 2 - label_width(xlabel) / 2, a.bottom + 10 + kCap + 12, xlabel,
              kLabel, kFont);
}

// Lines first, then markers over every line, so points stay visible where curves cross.
void draw_series(Canvas& c, const PlotArea& a, const std::vector<PlotSeries>& series) {
  size_t most = 0;
  for (const PlotSeries& s : series) most = std::max(most, s.connect ? s.xy.size() : 0);
  float radius = most <= 40 ? 3.5f : most <= 120 ? 2.5f : 0.f;
  for (const PlotSeries& s : series)
    for (size_t i = 1; s.connect && i < s.xy.size(); ++i)
      c.draw_line(static_cast<float>(a.px(s.xy[i - 1].first)),
                  static_cast<float>(a.py(s.xy[i - 1].second)),
                  static_cast<float>(a.px(s.xy[i].first)), static_cast<float>(a.py(s.xy[i].second)),
                  s.color, 2.f);
  for (const PlotSeries& s : series)
    for (auto [x, y] : s.xy) draw_marker(c, a.px(x), a.py(y), s, s.connect ? radius : 3.5f);
}

// A legend entry: a line with a marker, a gap, the name, then the gap before the next entry.
constexpr int kLegendLine = 22, kLegendNameGap = 8, kLegendEntryGap = 20;

int legend_entry_width(const PlotSeries& s) {
  return kLegendLine + kLegendNameGap + label_width(s.name) + kLegendEntryGap;
}

// The legend's width from its first line to the end of its last name, 0 with no entries.
int legend_width(const std::vector<PlotSeries>& series) {
  int w = 0;
  for (const PlotSeries& s : series)
    if (!s.xy.empty()) w += legend_entry_width(s);
  return w > 0 ? w - kLegendEntryGap : 0;
}

// The legend ending at x = right on the line at y: a line with a marker, then the name.
void draw_legend(Canvas& c, int right, int y, const std::vector<PlotSeries>& series) {
  int end = right + kLegendEntryGap;  // where the entry being drawn ends, its gap included
  for (auto it = series.rbegin(); it != series.rend(); ++it) {
    if (it->xy.empty()) continue;
    const int lx = end - legend_entry_width(*it);
    const double ly = y + kCap / 2.0;
    if (it->connect)
      c.draw_line(static_cast<float>(lx), static_cast<float>(ly),
                  static_cast<float>(lx + kLegendLine), static_cast<float>(ly), it->color, 2.f);
    draw_marker(c, lx + kLegendLine / 2, ly, *it, 3.5f);
    c.draw_text(lx + kLegendLine + kLegendNameGap, y, it->name, kLabel, kFont);
    end = lx;
  }
}

// Where a panel's parts go in columns [x0, x0 + w): its axes and their y labels, the plot
// area's left and right, and whether its legend needs a line of its own below the title
// (where on the title's line the two would overlap).
struct PanelLayout {
  DataAxes axes;
  std::vector<std::string> ylabels;
  int left, right;
  bool legend_below;
};

PanelLayout layout_panel(int x0, int w, const PlotPanel& panel) {
  PanelLayout p{data_axes(panel), {}, 0, 0, false};
  int label_w = 0;
  for (double t : p.axes.ya.ticks) {
    p.ylabels.push_back(tick_label(t, p.axes.ya.step));
    label_w = std::max(label_w, label_width(p.ylabels.back()));
  }
  p.left = x0 + 16 + label_w + 10, p.right = x0 + w - 18;
  const int title_end = p.left + label_width(panel.title) + 1;
  p.legend_below = title_end + 16 > p.right - legend_width(panel.series);
  return p;
}

// One panel of a canvas `height` pixels high, its plot area starting at row `top`: the title
// at the top left of the plot area, the legend at the top right, on the title's line or the
// one below it.
void draw_panel(Canvas& c, const PanelLayout& p, int top, int height, const PlotPanel& panel) {
  const int title_y = kPlotTop - kCap - 16;
  const PlotArea area{p.left, p.right, top, height - 56, p.axes.xa, p.axes.ya};
  draw_axes(c, area, p.ylabels, panel.xlabel);
  draw_bold(c, area.left, title_y, panel.title, kInk);
  draw_series(c, area, panel.series);
  if (!p.axes.any) {
    const std::string msg = "no data";
    c.draw_text((area.left + area.right) / 2 - label_width(msg) / 2,
                (area.top + area.bottom) / 2 - kCap / 2, msg, kLabel, kFont);
  }
  draw_legend(c, area.right, title_y + (p.legend_below ? kLegendLineDrop : 0), panel.series);
}

}  // namespace

Canvas render_panels(const std::vector<PlotPanel>& panels, int width, int height) {
  Canvas c(width, height, kWhite);
  const int n = std::max<int>(1, int(panels.size()));
  std::vector<PanelLayout> layouts;
  for (int i = 0; i < int(panels.size()); ++i)
    layouts.push_back(layout_panel(i * width / n, width / n, panels[size_t(i)]));
  // Side by side, the plot areas share their top, lowered for a legend's own line in any.
  const bool any_legend_below = std::any_of(
      layouts.begin(), layouts.end(), [](const PanelLayout& p) { return p.legend_below; });
  const int top = kPlotTop + (any_legend_below ? kLegendLineDrop : 0);
  for (size_t i = 0; i < panels.size(); ++i) draw_panel(c, layouts[i], top, height, panels[i]);
  return c;
}

Canvas render_training_curves(const std::vector<EpochPoint>& points) {
  // Epoch order, the last entry for a repeated epoch winning.
  std::map<int, EpochPoint> by_epoch;
  for (const EpochPoint& p : points) by_epoch[p.epoch] = p;

  PlotSeries train_loss{"train", kPlotBlue, true, false, {}}, val_loss{"val", kPlotOrange, true, true, {}};
  PlotSeries train_acc = train_loss, val_acc = val_loss;
  auto add = [](PlotSeries& s, int epoch, double v) {
    if (std::isfinite(v)) s.xy.emplace_back(epoch, v);
  };
  for (const auto& [epoch, p] : by_epoch) {
    add(train_loss, epoch, p.train_loss);
    add(val_loss, epoch, p.val_loss);
    add(train_acc, epoch, 100.0 * p.train_acc);
    add(val_acc, epoch, 100.0 * p.val_acc);
  }
  return render_panels({{"loss", "epoch", -INFINITY, INFINITY, {train_loss, val_loss}},
                        {"accuracy (%)", "epoch", 0, 100, {train_acc, val_acc}}},
                       kWidth, kHeight);
}

void plot_training_curves(const std::string& png_path, const std::vector<EpochPoint>& points) {
  write_png(png_path, render_training_curves(points));
}

}  // namespace minivit
