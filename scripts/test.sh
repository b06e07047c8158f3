#!/usr/bin/env bash
# Builds minivit and runs the whole test suite (CTest), then builds it again with
# AddressSanitizer and UndefinedBehaviorSanitizer and runs the suite once more (set
# MINIVIT_SANITIZE=0 to skip that pass). Installs missing Debian packages first, including
# PyTorch for the reference-implementation tests.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
scripts/install-deps.sh --reference
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
if [[ "${MINIVIT_SANITIZE:-1}" != 0 ]]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  cmake --build build-asan -j "$jobs"
  # The PyTorch comparisons check numerics, which the plain build already did.
  ctest --test-dir build-asan --output-on-failure -j "$jobs" -E '^reference\.'
fi
