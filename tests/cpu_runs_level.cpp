// Exits 0 when this CPU runs the level named by the argument (x86_64, avx2, avx512), else 77,
// which CTest counts as a skip: the layer tests of a level are compiled for it, and would
// stop with an illegal instruction on a CPU without it. Compiled for the baseline.
#include <cstdio>
#include <cstring>

#include "minivit/kernels/compute.h"

int main(int argc, char** argv) {
  using minivit::Isa;
  if (argc != 2) return 2;
  const Isa level = std::strcmp(argv[1], "avx512") == 0 ? Isa::avx512
                    : std::strcmp(argv[1], "avx2") == 0 ? Isa::avx2
                                                        : Isa::x86_64;
  if (minivit::cpu_runs(level)) return 0;
  std::printf("this CPU cannot run the %s level: skipped\n", minivit::isa_name(level));
  return 77;
}
