#!/usr/bin/env bash
# minivit's class-specific gradient rollout (grad_rollout.npy, from its own backward)
# against torch_grad_rollout.py (PyTorch's autograd on the reference model, in float64):
# a checkpoint with the reference's weights, `minivit attention` on a Fashion-MNIST test
# image for the predicted class and for a chosen one, the reference on the very input
# minivit saw (input.npy). The maps must agree to 1e-3 of their largest value, and
# summary.json must name the class the reference explained.
# Usage: check_grad_rollout.sh MINIVIT_EXE SOURCE_DIR [--set model.KEY=VALUE]...
# Exits 77 (reported as skipped by CTest) when PyTorch or the dataset is not installed.
set -euo pipefail
minivit=$1
source_dir=$2
shift 2
data=/usr/share/datasets/fashion-mnist
source "$source_dir/tests/reference/common.sh"
model_sets "$@"

few_images
checkpoint=$(reference_checkpoint 3)

status=0
# The predicted class, then another one (the predicted class plus 3, modulo 10).
for class in predicted other; do
  out=$tmp/att_$class
  class_args=()
  if [[ $class == other ]]; then
    predicted=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["grad_rollout"]["class_index"])' \
      "$tmp/att_predicted/summary.json")
    class_args=(--class $(((predicted + 3) % 10)))
  fi
  "$minivit" attention --checkpoint "$checkpoint" --index 1 --out "$out" "${class_args[@]}" \
    > "$tmp/attention.log" 2>&1 || { cat "$tmp/attention.log"; exit 1; }
  "$python" "$source_dir/tests/reference/torch_grad_rollout.py" --weights "$checkpoint" \
    --image-npy "$out/input.npy" "${class_args[@]}" --out "$tmp/ref_$class.npy" > "$tmp/ref.log"
  "$python" - "$out" "$tmp/ref_$class.npy" "$(cat "$tmp/ref.log")" <<'PY' || status=1
import json
import sys

import numpy as np

out, ref_path, ref_said = sys.argv[1], sys.argv[2], sys.argv[3]
mine = np.load(out + "/grad_rollout.npy")
ref = np.load(ref_path)
summary = json.load(open(out + "/summary.json"))
explained = summary["grad_rollout"]["class_index"]
ok = mine.dtype == np.float32 and mine.shape == ref.shape
diff = float(np.abs(mine.astype(np.float64) - ref).max()) if ok else float("inf")
scale = float(np.abs(ref).max())
ok = ok and scale > 0 and diff <= 1e-3 * scale and ref_said == "class %d" % explained
print("grad rollout %s (class %d) vs PyTorch autograd (%s): max |diff| %.2e of max %.2e: %s"
      % (mine.shape, explained, ref_said, diff, scale, "PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
done
exit $status
