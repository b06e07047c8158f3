# Shared by the multi-process tests: sourced with minivit's path and a scratch directory.
# usage (from a test): source common.sh MINIVIT WORKDIR
set -euo pipefail
MINIVIT=$1
WORK=$2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rm -rf "$WORK"
mkdir -p "$WORK"

# Two ranks on a machine of two cores, perhaps as root in a container: allow more ranks than
# cores, leave the ranks unbound, and (shared memory between containers' processes may not
# allow it) skip the single-copy mechanism of the shared-memory transport.
mpi_flags=(--oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none)
if [[ $(id -u) -eq 0 ]]; then mpi_flags+=(--allow-run-as-root); fi

run_ranks() {  # run_ranks R ARGS...: minivit ARGS on R ranks
  local r=$1
  shift
  mpirun "${mpi_flags[@]}" -np "$r" "$MINIVIT" "$@"
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# A tiny model on a tiny dataset, with everything random switched on: dropout in both
# places, crops, flips, erasing, mixup and cutmix; batch 15, so two ranks get shards of 8
# and 7 images. 400 training images: 26 steps per epoch. `schedule` and the drop-path rate
# (default 0: AdamW drifts further from rounding noise with it, over the longer runs of the
# resume test) are the knobs.
write_config() {  # write_config FILE OUT_DIR EPOCHS SCHEDULE [DROP_PATH]
  python3 "$HERE/make_tiny_dataset.py" "$WORK/data"
  cat > "$1" <<TOML
[model]
image_size = 16
channels = 1
patch_size = 4
dim = 16
depth = 2
heads = 2
mlp_dim = 32
dropout = 0.1
attention_dropout = 0.1
drop_path = ${5:-0}
num_classes = 4

[data]
format = "idx"
path = "$WORK/data"
mean = [0.3]
std = [0.3]
val_fraction = 0.2
crop_padding = 2
hflip = 0.5
erasing = 0.25
mixup = 0.2
cutmix = 0.2
mix_prob = 0.5

[optim]
name = "adamw"
lr = 5e-3
weight_decay = 0.01
schedule = "$4"
warmup_steps = 5
clip_grad_norm = 1.0
label_smoothing = 0.1

[train]
epochs = $3
batch_size = 15
seed = 3
threads = 1
log_every = 5
out_dir = "$2"
TOML
}

# compare A B [SUFFIX=TOL...]: every tensor within 1e-4 relative. AdamW runs pass
# attn.qkv.bias=1e-3: the key third of that bias has no gradient in exact arithmetic (the
# softmax ignores a constant per row), so its gradient is rounding noise, which Adam's
# normalisation turns into steps of up to lr; two summation orders (one process, two
# shards) give two such walks. Every other tensor, and SGD runs, stay within 1e-4.
compare() {
  python3 "$HERE/compare_weights.py" "$1" "$2" 1e-4 "${@:3}" || fail "$1 and $2 differ"
}
