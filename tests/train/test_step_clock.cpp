// The progress line's ETA with a patch-dropout run's full-token tail: each phase priced at
// its own measured rate, an unmeasured phase from the other by the token ratio.
#include <catch2/catch.hpp>

#include "minivit/train/step_clock.h"

using namespace minivit;

TEST_CASE("step clock: nothing timed yet, nothing promised", "[train]") {
  const StepClock clock(3.5);
  CHECK(clock.seconds_left(100, 10) == 0.0);
}

TEST_CASE("step clock: the tail priced from the dropped-patch rate by the token ratio", "[train]") {
  StepClock clock(3.5);
  for (int i = 0; i < 10; ++i) clock.record(false, 0.1);
  // 5 dropped-patch steps at 0.1 s, 4 on every patch at 0.35 s; the average rate alone
  // would have said 0.9 s.
  CHECK(clock.seconds_left(5, 4) == Approx(5 * 0.1 + 4 * 0.35));
  CHECK(clock.seconds_left(0, 0) == 0.0);
}

TEST_CASE("step clock: a measured tail is priced at its own rate", "[train]") {
  StepClock clock(3.5);
  for (int i = 0; i < 10; ++i) clock.record(false, 0.1);
  clock.record(true, 0.5);
  clock.record(true, 0.3);
  CHECK(clock.seconds_left(0, 3) == Approx(3 * 0.4));
  CHECK(clock.seconds_left(2, 3) == Approx(2 * 0.1 + 3 * 0.4));
}

TEST_CASE("step clock: a run resumed inside its tail prices dropped steps from it", "[train]") {
  StepClock clock(2.0);
  clock.record(true, 0.4);
  CHECK(clock.seconds_left(2, 1) == Approx(2 * 0.2 + 0.4));
}

TEST_CASE("step clock: without patch dropout both phases cost the same", "[train]") {
  StepClock clock;  // token ratio 1
  clock.record(false, 0.2);
  clock.record(false, 0.4);
  CHECK(clock.seconds_left(3, 2) == Approx(5 * 0.3));
}

TEST_CASE("step clock: throughput over both phases", "[train]") {
  StepClock clock(3.5);
  CHECK(clock.steps_per_second() == 0.0);
  clock.record(false, 0.1);
  clock.record(false, 0.1);
  clock.record(true, 0.3);
  CHECK(clock.steps_per_second() == Approx(3 / 0.5));
}
