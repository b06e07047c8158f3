#!/usr/bin/env bash
# The attention explorer in a real browser: trains a small model for ten steps on the first
# images of Fashion-MNIST, runs `minivit attention --count 5 --stats` on the test split, and has
# drive_page.py open one image's explorer and the gallery in headless Chromium, click
# patches and compare what the page shows with attention.npy, rollout.npy and
# grad_rollout.npy. The screenshots stay in OUT_DIR.
# Usage: check_explorer.sh MINIVIT_EXE SOURCE_DIR OUT_DIR [--set model.KEY=VALUE]...
set -euo pipefail
minivit=$1
source_dir=$2
out=$3
shift 3
chromium=$(command -v chromium || true)
if [[ -z $chromium ]]; then
  echo "error: no chromium on PATH (scripts/install-deps.sh --reference installs it)" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$out"
# Real images, few enough that the run's validation and test passes and --stats over the
# test split take moments, under the sanitizers too.
/usr/bin/python3 "$source_dir/tests/reference/idx_head.py" /usr/share/datasets/fashion-mnist \
  "$out/data" 352 64
"$minivit" train --config "$source_dir/configs/fashion_mnist.toml" --set data.path="$out/data" \
  "$@" \
  --set train.max_steps=10 --set train.threads=1 --set train.batch_size=32 \
  --out "$out/run" > "$out/train.log" 2>&1 || { cat "$out/train.log"; exit 1; }
"$minivit" attention --checkpoint "$out/run/last.safetensors" --count 5 --stats \
  --out "$out/attention" > "$out/attention.log" 2>&1 || { cat "$out/attention.log"; exit 1; }
/usr/bin/python3 "$source_dir/tests/inspect/browser/drive_page.py" --chromium "$chromium" \
  --dir "$out/attention/test_00002" --gallery "$out/attention" --screenshot "$out/explorer.png"
