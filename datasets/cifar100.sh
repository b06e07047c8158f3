#!/usr/bin/env bash
# Checks that CIFAR-100 (binary version) is in place for `data.format = "cifar100"`:
# train.bin (50000 records) and test.bin (10000 records) of 3074 bytes each. Nothing is
# downloaded; when a file is missing or has the wrong size this says where to get the data
# and exits non-zero.
# Usage: datasets/cifar100.sh [DIR]   (default data/cifar-100-binary)
set -euo pipefail
source "$(dirname "$0")/cifar_files.sh"
CIFAR_TITLE=CIFAR-100 CIFAR_TARBALL=cifar-100-binary.tar.gz CIFAR_TARBALL_SIZE="161 MB"
CIFAR_SUB=cifar-100-binary
dir=$(cifar_dir "${1:-data/$CIFAR_SUB}" "$CIFAR_SUB")
# Records of a coarse label byte + a fine label byte + 32x32x3 pixel bytes.
cifar_check_files "$dir" 3074 train.bin:50000 test.bin:10000

for names in fine_label_names.txt coarse_label_names.txt; do
  [[ -f $dir/$names ]] ||
    echo "note: $dir/$names is missing; minivit uses the standard class names"
done
echo "CIFAR-100 is complete in $dir: 50000 training and 10000 test images, 32x32 RGB,"
echo "100 fine classes in 20 coarse ones."
echo "Config keys to use (mean and std are the training set's per-channel statistics;"
echo "for the 20 coarse classes set label = \"coarse\" and num_classes = 20):"
cat <<CONF

[model]
image_size = 32
channels = 3
num_classes = 100

[data]
format = "cifar100"
path = "$(cd "$dir" && pwd)"
label = "fine"
mean = [0.5071, 0.4865, 0.4409]
std = [0.2673, 0.2564, 0.2762]
CONF
