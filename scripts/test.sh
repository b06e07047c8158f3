#!/usr/bin/env bash
# Builds minivit and runs the whole test suite (CTest); then builds the program alone with
# MPI (build-mpi, -DMINIVIT_MPI=ON) and runs the multi-process tests, labelled mpi (set
# MINIVIT_MPI=0 to skip them); then builds the program for any x86-64 CPU (build-portable,
# -DMINIVIT_NATIVE=OFF) and runs it under qemu as older CPUs, labelled cpu (set
# MINIVIT_PORTABLE=0 to skip them); then builds it again with AddressSanitizer and
# UndefinedBehaviorSanitizer and runs the suite once more (set MINIVIT_SANITIZE=0 to skip that
# pass); last, builds the libFuzzer targets with clang and fuzzes each file reader for
# MINIVIT_FUZZ_SECONDS (default 10) through scripts/fuzz.sh (set MINIVIT_FUZZ=0 to skip it).
# Installs missing Debian packages first, including PyTorch for the reference-implementation
# tests and Open MPI (and clang, by scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
scripts/install-deps.sh --reference --mpi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
if [[ "${MINIVIT_MPI:-1}" != 0 ]]; then
  # Only what the mpi tests need: the program (they are scripts around it), no test suite.
  cmake -S . -B build-mpi -DCMAKE_BUILD_TYPE=Release -DMINIVIT_MPI=ON -DMINIVIT_TESTS=OFF
  cmake --build build-mpi -j "$jobs" --target minivit
  # One at a time: each runs two ranks on a machine that may have two cores.
  ctest --test-dir build-mpi --output-on-failure -L mpi
fi
if [[ "${MINIVIT_PORTABLE:-1}" != 0 ]]; then
  # The program built for any x86-64 CPU, run under qemu as an AVX2 CPU and an SSE-only one.
  cmake -S . -B build-portable -DCMAKE_BUILD_TYPE=Release -DMINIVIT_NATIVE=OFF -DMINIVIT_TESTS=OFF
  cmake --build build-portable -j "$jobs" --target minivit
  ctest --test-dir build-portable --output-on-failure -L cpu
fi
if [[ "${MINIVIT_SANITIZE:-1}" != 0 ]]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  cmake --build build-asan -j "$jobs"
  # The PyTorch comparisons check numerics, which the plain build already did.
  ctest --test-dir build-asan --output-on-failure -j "$jobs" -E '^reference\.'
fi
if [[ "${MINIVIT_FUZZ:-1}" != 0 ]]; then
  # A short pass: the fuzz build keeps compiling, and each reader meets fresh inputs beyond the
  # seeds and regressions the suite replays. A finding fails the run and is kept in
  # fuzz/regressions/; scripts/fuzz.sh with more seconds fuzzes in earnest.
  scripts/fuzz.sh "${MINIVIT_FUZZ_SECONDS:-10}"
fi
