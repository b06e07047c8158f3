#!/usr/bin/env bash
# The default build (any x86-64 CPU, levels chosen at run time) against a -march=native build
# of another commit, `bench` alternating in one run: the default config, then the blocks on
# every patch in fp32.
# usage: portable_vs_native.sh NATIVE_MINIVIT PORTABLE_MINIVIT [ROUNDS]
set -euo pipefail
native=$1
portable=$2
rounds=${3:-3}
forms=("" "--set train.precision=fp32 --set model.patch_drop=0 --set train.unmasked_epochs=0")
for form in "${forms[@]}"; do
  echo "== configs/fashion_mnist.toml ${form}"
  for round in $(seq "$rounds"); do
    for build in native portable; do
      exe=$native
      [[ $build == portable ]] && exe=$portable
      # shellcheck disable=SC2086
      "$exe" bench --config configs/fashion_mnist.toml $form 2>&1 |
        awk -v b="$build" -v r="$round" '/^train|^eval|^latency/ {print r, b, $0}'
    done
  done
done
