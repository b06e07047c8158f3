#pragma once
// Training time per phase, for the progress line's throughput and ETA. A run with patch dropout and
// train.unmasked_epochs ends on every patch, where a step costs several times a dropped-patch
// step; an ETA from the average rate over the whole run so far then promises the tail far too
// early. The clock keeps the two phases apart and prices the steps left in each at that
// phase's own rate.
#include <cstdint>

namespace minivit {

class StepClock {
 public:
  // `token_ratio`: tokens of a step on every patch over those of a dropped-patch step
  // (model.tokens() / model.train_tokens()). It prices the phase not yet run from the one
  // measured: a step's cost grows close to linearly in its tokens at these sizes (bench:
  // 3.7x the images/s at 14 tokens of 49).
  explicit StepClock(double token_ratio = 1.0) : token_ratio_(token_ratio) {}

  void record(bool every_patch, double seconds) {
    seconds_[every_patch] += seconds;
    ++steps_[every_patch];
  }

  // Steps per second over both phases so far, the run's throughput (0 before any step).
  double steps_per_second() const {
    const double seconds = seconds_[0] + seconds_[1];
    return seconds > 0.0 ? double(steps_[0] + steps_[1]) / seconds : 0.0;
  }

  // Seconds the given steps left in each phase will take; 0 before any step was timed.
  double seconds_left(int64_t dropped_steps_left, int64_t every_patch_steps_left) const;

 private:
  double token_ratio_;
  double seconds_[2] = {0.0, 0.0};  // [0]: dropped-patch steps, [1]: steps on every patch
  int64_t steps_[2] = {0, 0};
};

}  // namespace minivit
