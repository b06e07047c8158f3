#!/usr/bin/env bash
# Checks that CIFAR-100 (binary version) is in place for `data.format = "cifar100"`:
# train.bin (50000 records) and test.bin (10000 records) of 3074 bytes each. Nothing is
# downloaded; when a file is missing or has the wrong size this says where to get the data
# and exits non-zero.
# Usage: datasets/cifar100.sh [DIR]   (default data/cifar-100-binary)
set -euo pipefail
dir=${1:-data/cifar-100-binary}
sub=cifar-100-binary  # what the tarball unpacks into
# minivit also reads the directory the tarball was unpacked in.
[[ -d $dir/$sub ]] && dir=$dir/$sub
record=3074  # coarse label byte + fine label byte + 32x32x3 pixel bytes

problems=()
for entry in train.bin:50000 test.bin:10000; do
  name=${entry%%:*} records=${entry##*:}
  file=$dir/$name want=$((records * record))
  if [[ ! -f $file ]]; then
    problems+=("$file: missing")
  elif (( $(stat -c %s "$file") != want )); then
    problems+=("$file: $(stat -c %s "$file") bytes, expected $want ($records records of $record bytes)")
  fi
done

if (( ${#problems[@]} > 0 )); then
  # Unpacking into the parent of a directory named like the tarball's gives that directory.
  target=$dir
  [[ $(basename "$dir") == "$sub" ]] && target=$(dirname "$dir")
  printf '%s\n' "${problems[@]}" >&2
  cat >&2 <<MSG

CIFAR-100 is not complete in $dir.
Download the binary version (not the python or matlab one), cifar-100-binary.tar.gz
(about 161 MB), from
  https://www.cs.toronto.edu/~kriz/cifar.html
and unpack it with
  mkdir -p $target && tar -xzf cifar-100-binary.tar.gz -C $target
which creates $target/$sub/; then run this script again.
MSG
  exit 1
fi

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
