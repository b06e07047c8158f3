#pragma once
// Line and scatter plots: the training curves written into a run directory (two panels
// side by side, loss and accuracy per epoch, train and validation) and the attention
// statistics `minivit attention --stats` draws, on the same axes, ticks and legend.
#include <string>
#include <utility>
#include <vector>

#include "minivit/inspect/canvas.h"

namespace minivit {

constexpr Color kPlotBlue = {31, 119, 180};
constexpr Color kPlotOrange = {230, 110, 0};
constexpr Color kPlotAxis = {110, 110, 110};  // axis lines and tick marks

// A series of points over whole-number x (epochs, layers): joined by lines with markers
// when `connect`, else markers alone (a scatter).
struct PlotSeries {
  std::string name;
  Color color;
  bool connect = true;
  bool square_markers = false;
  std::vector<std::pair<double, double>> xy;  // finite points, in x order when connected
};

// One panel: axes with round ticks (value ticks kept within [tick_min, tick_max], so a
// percent axis has no "104"), a title, an x label and a legend at the top right, in line
// with the title or, where the two would overlap, on a line of its own below it.
struct PlotPanel {
  std::string title, xlabel;
  double tick_min, tick_max;
  std::vector<PlotSeries> series;
};

// The panels side by side on one width x height canvas, their plot areas at the same height:
// where one panel's legend takes a line of its own, every plot area starts below that line.
Canvas render_panels(const std::vector<PlotPanel>& panels, int width, int height);

// One epoch's summary. Accuracies are fractions in [0, 1] (plotted as percent). Any value
// may be NaN or infinite (no validation split, a diverged loss): that point is left out
// and the line joins the neighbouring points.
struct EpochPoint {
  int epoch;
  double train_loss, train_acc, val_loss, val_acc;
};

// Renders the two panels on a 900x400 canvas. Points are taken in epoch order; when an
// epoch appears twice (a resumed run) the later entry wins. No points gives empty axes.
Canvas render_training_curves(const std::vector<EpochPoint>& points);

// render_training_curves written as a PNG through write_file_atomic. Throws
// minivit::Error naming the path if it cannot be written.
void plot_training_curves(const std::string& png_path, const std::vector<EpochPoint>& points);

}  // namespace minivit
