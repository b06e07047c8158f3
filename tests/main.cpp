#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "minivit/kernels/runtime.h"

int main(int argc, char** argv) {
  // The tests check the kernels the program runs with.
  minivit::restart_with_tuned_runtime(argv);
  return Catch::Session().run(argc, argv);
}
