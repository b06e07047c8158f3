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
# model.drop_path, model.patch_drop, model.dropout and model.attention_dropout, training
# draws rather than a shape or form, go to `drop_path`, `patch_drop`, `dropout` and
# `attention_dropout` (0 unless given) instead of `init_args`. The one train key taken, train.precision, the arithmetic of a
# training step, goes to `precision` (fp32 unless given), which the checks pass on to
# minivit themselves, after the config.
model_sets() {
  # Both sides start from the same shape and form, the reference's defaults, named here (the
  # config file the checks start from may choose others); a check's own --set come after
  # them and win.
  set -- --set model.patch_size=4 --set model.dim=64 --set model.depth=6 --set model.heads=4 \
    --set model.mlp_dim=128 \
    --set model.attention=scaled_dot --set model.pos_embed=learned --set model.pool=cls \
    --set model.patch_embed=linear "$@"
  sets=()
  init_args=()
  drop_path=0
  patch_drop=0
  dropout=0
  attention_dropout=0
  precision=fp32
  while (($#)); do
    if [[ $1 != --set || $# -lt 2 || ( $2 != model.?*=?* && $2 != train.precision=?* ) ]]; then
      echo "error: expected --set model.KEY=VALUE or --set train.precision=VALUE, got '$*'" >&2
      exit 2
    fi
    local key=${2%%=*} value=${2#*=}
    value=${value#\"}
    value=${value%\"}
    if [[ $key == train.precision ]]; then
      precision=$value
      shift 2
      continue
    fi
    key=${key#model.}
    sets+=(--set "$2")
    if [[ $key == drop_path ]]; then
      drop_path=$value
    elif [[ $key == patch_drop ]]; then
      patch_drop=$value
    elif [[ $key == dropout ]]; then
      dropout=$value
    elif [[ $key == attention_dropout ]]; then
      attention_dropout=$value
    else
      init_args+=("--${key//_/-}" "$value")
    fi
    shift 2
  done
}

# few_images: the first 64 training and 16 test images of `data`, copied into $tmp/data,
# which `data` names from then on. The checks compare on real images, but a run made for one
# (its validation and test passes too) then reads a few of them, not 70,000.
few_images() {
  "$python" "$source_dir/tests/reference/idx_head.py" "$data" "$tmp/data" 64 16
  data=$tmp/data
}

# reference_checkpoint SEED: a minivit checkpoint holding the reference's initial weights of
# the form in `sets`/`init_args` (call model_sets and few_images first), with minivit's
# metadata: `train --init` for one step at a learning rate too small to move a float32
# weight. Prints its path.
reference_checkpoint() {
  "${ref[@]}" init --seed "$1" "${init_args[@]}" --out "$tmp/w.safetensors" > /dev/null
  "$minivit" train --config "$source_dir/configs/fashion_mnist.toml" --init "$tmp/w.safetensors" \
    --out "$tmp/run" --set data.path="$data" "${sets[@]}" \
    --set optim.name=sgd --set optim.lr=1e-30 --set optim.momentum=0 --set optim.weight_decay=0 \
    --set optim.schedule=constant --set optim.warmup_steps=0 --set optim.clip_grad_norm=0 \
    --set train.max_steps=1 --set train.batch_size=8 --set train.precision=fp32 \
    > "$tmp/train.log" 2>&1 ||
    { cat "$tmp/train.log" >&2; return 1; }
  echo "$tmp/run/last.safetensors"
}
