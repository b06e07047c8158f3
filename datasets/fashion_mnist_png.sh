#!/usr/bin/env bash
# Writes Fashion-MNIST as a tree of PNG files, OUT_DIR/{train,test}/<class>/<index>.png
# (default data/fashion-mnist-png), with `minivit export`: the same 70,000 images the `idx`
# loader reads, for training through data.format = "folder". Builds nothing: it runs an
# existing minivit binary (build/minivit, or the one named by MINIVIT=...).
#
#   datasets/fashion_mnist_png.sh [OUT_DIR]
#   build/minivit train --config configs/fashion_mnist.toml \
#       --set data.format=folder --set data.path=data/fashion-mnist-png
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-data/fashion-mnist-png}
minivit=${MINIVIT:-$root/build/minivit}
idx=/usr/share/datasets/fashion-mnist

if [[ ! -x $minivit ]]; then
  echo "fashion_mnist_png.sh: $minivit: no minivit binary; build it first (cmake -S . -B build && cmake --build build -j2) or set MINIVIT=path/to/minivit" >&2
  exit 1
fi
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  if [[ ! -e $idx/$f.gz && ! -e $idx/$f ]]; then
    echo "fashion_mnist_png.sh: $idx/$f.gz: missing; run datasets/fashion_mnist.sh first" >&2
    exit 1
  fi
done
"$minivit" export --config "$root/configs/fashion_mnist.toml" --set "data.path=$idx" --out "$out"
