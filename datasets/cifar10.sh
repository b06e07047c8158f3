#!/usr/bin/env bash
# Checks that CIFAR-10 (binary version) is in place for `data.format = "cifar10"`: the five
# training batches and the test batch, 10000 records of 3073 bytes each. Nothing is
# downloaded; when a file is missing or has the wrong size this says where to get the data
# and exits non-zero.
# Usage: datasets/cifar10.sh [DIR]   (default data/cifar-10-batches-bin)
set -euo pipefail
dir=${1:-data/cifar-10-batches-bin}
sub=cifar-10-batches-bin  # what the tarball unpacks into
# minivit also reads the directory the tarball was unpacked in.
[[ -d $dir/$sub ]] && dir=$dir/$sub
record=3073  # 1 label byte + 32x32x3 pixel bytes
want=$((10000 * record))

problems=()
for name in data_batch_{1..5}.bin test_batch.bin; do
  file=$dir/$name
  if [[ ! -f $file ]]; then
    problems+=("$file: missing")
  elif (( $(stat -c %s "$file") != want )); then
    problems+=("$file: $(stat -c %s "$file") bytes, expected $want (10000 records of $record bytes)")
  fi
done

if (( ${#problems[@]} > 0 )); then
  # Unpacking into the parent of a directory named like the tarball's gives that directory.
  target=$dir
  [[ $(basename "$dir") == "$sub" ]] && target=$(dirname "$dir")
  printf '%s\n' "${problems[@]}" >&2
  cat >&2 <<MSG

CIFAR-10 is not complete in $dir.
Download the binary version (not the python or matlab one), cifar-10-binary.tar.gz
(about 162 MB), from
  https://www.cs.toronto.edu/~kriz/cifar.html
and unpack it with
  mkdir -p $target && tar -xzf cifar-10-binary.tar.gz -C $target
which creates $target/$sub/; then run this script again.
MSG
  exit 1
fi

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
