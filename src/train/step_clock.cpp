#include "minivit/train/step_clock.h"

namespace minivit {

double StepClock::seconds_left(int64_t dropped_steps_left, int64_t every_patch_steps_left) const {
  double dropped = steps_[0] > 0 ? seconds_[0] / double(steps_[0]) : -1.0;
  double every_patch = steps_[1] > 0 ? seconds_[1] / double(steps_[1]) : -1.0;
  if (dropped < 0.0 && every_patch < 0.0) return 0.0;
  if (every_patch < 0.0) every_patch = dropped * token_ratio_;
  if (dropped < 0.0) dropped = every_patch / token_ratio_;
  return double(dropped_steps_left) * dropped + double(every_patch_steps_left) * every_patch;
}

}  // namespace minivit
