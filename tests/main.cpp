#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "minivit/gemm.h"

int main(int argc, char** argv) {
  // The tests check the kernels the program runs with.
  minivit::select_blas_kernels(argv);
  return Catch::Session().run(argc, argv);
}
