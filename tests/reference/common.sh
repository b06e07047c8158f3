# Sourced by the check_*.sh scripts after they set `source_dir` and `data`: skips the check
# (exit 77, reported as skipped by CTest) when PyTorch or the dataset is missing, and sets
# `python`, `ref` (the reference command) and `tmp` (a scratch directory removed on exit).
python=/usr/bin/python3
if ! "$python" -c "import torch, numpy" 2>/dev/null; then
  echo "skipped: $python cannot import torch and numpy (scripts/install-deps.sh --reference installs them)"
  exit 77
fi
for split in train t10k; do
  if [[ ! -e "$data/$split-images-idx3-ubyte.gz" && ! -e "$data/$split-images-idx3-ubyte" ]]; then
    echo "skipped: no Fashion-MNIST at $data"
    exit 77
  fi
done
ref=("$python" "$source_dir/tests/reference/torch_vit.py")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# model_sets [--set model.KEY=VALUE]...: the model form a check runs, as `sets` (minivit's
# --set arguments, as given) and `init_args` (the reference init's --KEY VALUE, with the
# key's underscores as dashes and TOML string quotes dropped). Only model keys: the rest of
# a check's configuration is what makes the two sides comparable, so it is not open.
model_sets() {
  sets=()
  init_args=()
  while (($#)); do
    if [[ $1 != --set || $# -lt 2 || $2 != model.?*=?* ]]; then
      echo "error: expected --set model.KEY=VALUE, got '$*'" >&2
      exit 2
    fi
    local key=${2%%=*} value=${2#*=}
    key=${key#model.}
    value=${value#\"}
    value=${value%\"}
    sets+=(--set "$2")
    init_args+=("--${key//_/-}" "$value")
    shift 2
  done
}
