#!/usr/bin/env bash
# Builds minivit and runs the whole test suite (CTest). Installs missing Debian packages
# first, including PyTorch for the reference-implementation tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --reference
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
