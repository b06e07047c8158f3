#!/usr/bin/env bash
# Checks that CIFAR-10 (binary version) is in place for `data.format = "cifar10"`: the five
# training batches and the test batch, 10000 records of 3073 bytes each. Nothing is
# downloaded; when a file is missing or has the wrong size this says where to get the data
# and exits non-zero.
# Usage: datasets/cifar10.sh [DIR]   (default data/cifar-10-batches-bin)
set -euo pipefail
source "$(dirname "$0")/cifar_files.sh"
CIFAR_TITLE=CIFAR-10 CIFAR_TARBALL=cifar-10-binary.tar.gz CIFAR_TARBALL_SIZE="162 MB"
CIFAR_SUB=cifar-10-batches-bin
dir=$(cifar_dir "${1:-data/$CIFAR_SUB}" "$CIFAR_SUB")
# Records of 1 label byte + 32x32x3 pixel bytes.
cifar_check_files "$dir" 3073 data_batch_{1..5}.bin:10000 test_batch.bin:10000

[[ -f $dir/batches.meta.txt ]] ||
  echo "note: $dir/batches.meta.txt is missing; minivit uses the standard class names"
echo "CIFAR-10 is complete in $dir: 50000 training and 10000 test images, 32x32 RGB, 10 classes."
echo "Config keys to use (mean and std are the training set's per-channel statistics):"
cat <<CONF

[model]
image_size = 32
channels = 3
num_classes = 10

[data]
format = "cifar10"
path = "$(cd "$dir" && pwd)"
mean = [0.4914, 0.4822, 0.4465]
std = [0.2470, 0.2435, 0.2616]
CONF
