#!/usr/bin/env bash
# Prediction through the installed C API against `minivit bench` on the same model, alternating
# in one run: bench's latency line (batch 1, 1 thread) and evaluation rate (batch 128, every
# thread) beside api_bench.c's, which times minivit_predict the same way.
# usage: experiments/api_speed/run.sh BUILD_DIR CHECKPOINT [ROUNDS]
# (CHECKPOINT: a model of configs/fashion_mnist.toml, e.g. runs/fashion_mnist/last.safetensors)
set -euo pipefail
build=$1
checkpoint=$2
rounds=${3:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > /dev/null
export PKG_CONFIG_PATH=$work/prefix/lib/pkgconfig
here=$(cd "$(dirname "$0")" && pwd)
cc -O2 -o "$work/api_bench" "$here/api_bench.c" $(pkg-config --cflags --libs minivit) -lm \
  -Wl,-rpath,"$work/prefix/lib"
for round in $(seq "$rounds"); do
  "$work/prefix/bin/minivit" bench --config configs/fashion_mnist.toml 2>&1 |
    awk -v r="$round" '/^eval|^latency/ {print r, "bench", $0}'
  "$work/api_bench" "$checkpoint" 1000 50 | awk -v r="$round" '{print r, $0}'
done
