#!/usr/bin/env bash
# Position embeddings on real images: trains the default model with model.pos_embed = none
# and = learned (EPOCHS each, default 2), writes the first N Fashion-MNIST test images
# (default 500) as PGM files as they are and with their 4x4 patches moved by one fixed
# permutation, and compares what `minivit predict` says of the two.
# Usage: experiments/attention_forms/shuffle_patches.sh [MINIVIT_EXE] [OUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
minivit=$(realpath "${1:-$root/build/minivit}")
out=$(realpath -m "${2:-$root/runs/shuffle_patches}")
epochs=${EPOCHS:-2}
count=${N:-500}
data=/usr/share/datasets/fashion-mnist
mkdir -p "$out"
/usr/bin/python3 "$here/shuffle_patches.py" write "$data" "$out" "$count"
# The default config as it was when the README's figures were taken, so that they stay
# reproducible.
source "$root/experiments/study_model.sh"
for pos in none learned; do
  [[ -f $out/$pos/eval.json ]] ||
    "$minivit" train --config "$root/configs/fashion_mnist.toml" "${study_model[@]}" \
      --set model.pos_embed=$pos \
      --set train.epochs="$epochs" --set data.val_fraction=0 --out "$out/$pos" > "$out/$pos.log" 2>&1
  for images in original shuffled; do
    "$minivit" predict --checkpoint "$out/$pos/last.safetensors" --topk 1 \
      --json "$out/${pos}_$images.json" "$out/$images"/*.pgm > /dev/null
  done
  /usr/bin/python3 "$here/shuffle_patches.py" compare "$out" "$pos"
done
