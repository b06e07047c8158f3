#!/usr/bin/env bash
# minivit's attention maps and rollout against the independent PyTorch implementation:
# a checkpoint with the reference's weights (made by `train --init` with one step at a
# vanishing learning rate, so it carries minivit's metadata), `minivit attention` on a
# Fashion-MNIST test image, then torch_vit.py's attention on the very input minivit saw
# (input.npy). Every weight of [layers, heads, T, T] must agree to 1e-4, and rollout.npy
# must equal the rollout recomputed in NumPy from the PyTorch maps, for each fusion. With
# sequence pooling, pool_weights.npy must agree with PyTorch's pooling weights to 1e-4, and
# the rollout is read with PyTorch's.
# Usage: check_attention.sh MINIVIT_EXE SOURCE_DIR [DATA_DIR [CHECKPOINT]] [--set model.KEY=VALUE]...
#   CHECKPOINT: compare on this minivit checkpoint instead (for instance a trained one); its
#   metadata then decides the model form.
#   --set model.KEY=VALUE: the model form of the weights made here (e.g. --set
#   model.attention=cosine); minivit gets it as given, the reference's init as --KEY VALUE.
# Exits 77 (reported as skipped by CTest) when PyTorch or the dataset is not installed.
set -euo pipefail
minivit=$1
source_dir=$2
shift 2
positional=()
while (($#)) && [[ $1 != --set ]]; do
  positional+=("$1")
  shift
done
data=${positional[0]:-/usr/share/datasets/fashion-mnist}
checkpoint=${positional[1]:-}
source "$source_dir/tests/reference/common.sh"
model_sets "$@"
if [[ -n "$checkpoint" ]] && (($#)); then
  echo "error: a CHECKPOINT carries its own model form; --set applies only to weights made here" >&2
  exit 2
fi

if [[ -z "$checkpoint" ]]; then
  few_images
  checkpoint=$(reference_checkpoint 2)
fi

status=0
for variant in "mean 0" "max 0.9" "min 0.5"; do
  read -r fusion discard <<< "$variant"
  out=$tmp/att_$fusion
  "$minivit" attention --checkpoint "$checkpoint" --index 0 --out "$out" \
    --fusion "$fusion" --discard "$discard" > "$tmp/attention.log" 2>&1 ||
    { cat "$tmp/attention.log"; exit 1; }
  pool_args=()
  [[ -f $out/pool_weights.npy ]] && pool_args=(--pool-weights-out "$tmp/ref_pool_$fusion.npy")
  "${ref[@]}" attention --weights "$checkpoint" --image-npy "$out/input.npy" \
    --out "$tmp/ref_$fusion.npy" "${pool_args[@]}" > /dev/null
  "$python" - "$out" "$tmp/ref_$fusion.npy" "$fusion" "$discard" "$checkpoint" "$source_dir" \
    "$tmp/ref_pool_$fusion.npy" \
    <<'PY' || status=1
import sys
import numpy as np

out, ref_path, fusion, discard = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
sys.path.insert(0, sys.argv[6] + "/tests/reference")
from vit_files import read_safetensors  # noqa: E402
from vit_model import form_from_metadata  # noqa: E402

pool = form_from_metadata(read_safetensors(sys.argv[5])[1], "pool")
cls_pool = pool == "cls"
mine = np.load(out + "/attention.npy")
ref = np.load(ref_path)
rollout = np.load(out + "/rollout.npy")
pool_weights = ref_pool_weights = None
if pool == "seq":
    pool_weights = np.load(out + "/pool_weights.npy").reshape(-1)
    ref_pool_weights = np.load(sys.argv[7]).astype(np.float64)


def paper_rollout(att, fusion, discard, cls_pool, pool_weights):
    """Abnar & Zuidema: fuse heads, drop the smallest entries (never column 0, the CLS
    column), add I, renormalise rows, multiply up the layers; CLS row over the patches.

    Without a CLS token (mean or sequence pooling) every token is a patch: no column is
    spared, and the pooled output is the mean of the last layer's tokens, or their sum
    weighted by the pooling weights, so its rollout is the mean of the joint rows, or
    their sum weighted the same way."""
    L, H, T, _ = att.shape
    first = 1 if cls_pool else 0
    joint = np.eye(T)
    for layer in att.astype(np.float64):
        a = {"mean": layer.mean(0), "max": layer.max(0), "min": layer.min(0)}[fusion]
        rest = a[:, first:].copy().ravel()
        k = int(np.floor(discard * rest.size))
        rest[np.argsort(rest, kind="stable")[:k]] = 0.0
        a[:, first:] = rest.reshape(T, T - first)
        a = a + np.eye(T)
        a = a / a.sum(axis=-1, keepdims=True)
        joint = a @ joint
    G = int(round((T - first) ** 0.5))
    if pool_weights is not None:
        pooled = pool_weights @ joint
    else:
        pooled = joint[0] if cls_pool else joint.mean(axis=0)
    return pooled[first:].reshape(G, G)


ok = mine.dtype == np.float32 and mine.shape == ref.shape and mine.ndim == 4
diff = float(np.abs(mine.astype(np.float64) - ref).max()) if ok else float("inf")
rows = float(np.abs(mine.sum(-1) - 1).max()) if ok else float("inf")
want = paper_rollout(ref, fusion, discard, cls_pool, ref_pool_weights)
rdiff = float(np.abs(rollout - want).max()) if rollout.shape == want.shape else float("inf")
pdiff = 0.0
if pool == "seq":
    pdiff = (float(np.abs(pool_weights - ref_pool_weights).max())
             if pool_weights.shape == ref_pool_weights.shape else float("inf"))
    print("pool_weights.npy vs PyTorch's pooling weights: max |diff| %.2e" % pdiff)
ok = ok and diff <= 1e-4 and rows <= 1e-5 and rdiff <= 1e-4 and pdiff <= 1e-4
print("attention %s vs PyTorch: max |diff| %.2e, max |row sum - 1| %.1e; "
      "rollout (fusion %s, discard %g) vs NumPy from PyTorch's maps: max |diff| %.2e: %s"
      % (mine.shape, diff, rows, fusion, discard, rdiff, "PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
done
exit $status
