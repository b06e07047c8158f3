#pragma once
// The training-curves picture written into a run directory: two panels side by side,
// loss and accuracy per epoch, train and validation, with axes, round tick values, a
// legend and the points marked.
#include <string>
#include <vector>

#include "minivit/inspect/canvas.h"

namespace minivit {

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
