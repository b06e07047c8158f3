#!/usr/bin/env bash
# Makes Fashion-MNIST available: Debian's dataset-fashion-mnist package installs the four
# IDX files (gzip) under /usr/share/datasets/fashion-mnist, which configs/fashion_mnist.toml
# reads directly. Uses sudo when not root.
set -euo pipefail
dir=/usr/share/datasets/fashion-mnist
if [[ ! -e $dir/train-images-idx3-ubyte.gz ]]; then
  sudo=()
  [[ $(id -u) -ne 0 ]] && sudo=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q dataset-fashion-mnist
fi
ls -l "$dir"
