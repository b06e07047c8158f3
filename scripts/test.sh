#!/usr/bin/env bash
# Builds minivit and runs the whole test suite (CTest), the program under qemu as older CPUs
# among it (label cpu); then builds the program alone with MPI (build-mpi, -DMINIVIT_MPI=ON)
# and runs the multi-process tests, labelled mpi (set MINIVIT_MPI=0 to skip them); then
# builds it again with AddressSanitizer and UndefinedBehaviorSanitizer and runs the suite once
# more but the cpu and api checks (set MINIVIT_SANITIZE=0 to skip that pass); last, builds
# the libFuzzer targets with clang and fuzzes each file reader for MINIVIT_FUZZ_SECONDS
# (default 10) through scripts/fuzz.sh (set MINIVIT_FUZZ=0 to skip it).
# Installs missing Debian packages first, including PyTorch for the reference-implementation
# tests and Open MPI (and clang, by scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
scripts/install-deps.sh --reference --mpi
# Tests run two at a time on cores they share: OpenMP threads that wait at a barrier sleep
# after a short spin instead of libgomp's long one (docs/performance.md).
export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-10000}
# The plain and the MPI builds compile all but one file alike: through ccache, whose cache
# lives in build/ccache and sees paths relative to the repository, the MPI build takes the
# plain build's objects and compiles only src/train/distributed.cpp, the one MPI changes.
launcher=()
if [[ "${MINIVIT_MPI:-1}" != 0 ]] && command -v ccache > /dev/null; then
  export CCACHE_DIR=${CCACHE_DIR:-$PWD/build/ccache} CCACHE_BASEDIR=$PWD
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${launcher[@]}"
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
if [[ "${MINIVIT_MPI:-1}" != 0 ]]; then
  # Only what the mpi tests need: the program (they are scripts around it), no test suite.
  cmake -S . -B build-mpi -DCMAKE_BUILD_TYPE=Release -DMINIVIT_MPI=ON -DMINIVIT_TESTS=OFF \
    "${launcher[@]}"
  cmake --build build-mpi -j "$jobs" --target minivit
  # One at a time: each runs two ranks on a machine that may have two cores.
  ctest --test-dir build-mpi --output-on-failure -L mpi
fi
if [[ "${MINIVIT_SANITIZE:-1}" != 0 ]]; then
  # The layer tests of the highest level this CPU runs, AVX-512's or AVX2's, the one whose
  # layers the suite's other tests run too: those of the levels below check numerics the
  # plain build already checked.
  layer_level=avx512
  build/tests/minivit_cpu_runs_level avx512 > /dev/null || layer_level=avx2
  # RelWithDebInfo's -O2 with line tables alone (-g1), all a report needs to name function,
  # file and line: full debug information took a quarter of the compiler's time on the
  # attention core's many specialisations. (-O1 builds faster still, but below -O2 GCC
  # fuses no multiply-adds, so the layers' plain loops would no longer round as in the
  # builds that users run.)
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMINIVIT_LAYER_TEST_LEVELS="$layer_level" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  cmake --build build-asan -j "$jobs"
  # The PyTorch comparisons check numerics too, which the plain build already did; the cpu
  # checks run the program under qemu and the api ones load the library into programs built
  # without the sanitizers, neither of which the sanitizers' runtime takes to.
  ctest --test-dir build-asan --output-on-failure -j "$jobs" -E '^reference\.' -LE 'cpu|api'
fi
if [[ "${MINIVIT_FUZZ:-1}" != 0 ]]; then
  # A short pass: the fuzz build keeps compiling, and each reader meets fresh inputs beyond the
  # seeds and regressions the suite replays. A finding fails the run and is kept in
  # fuzz/regressions/; scripts/fuzz.sh with more seconds fuzzes in earnest.
  scripts/fuzz.sh "${MINIVIT_FUZZ_SECONDS:-10}"
fi
