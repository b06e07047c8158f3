# Sourced by the shell checks that run the program as a user would (tests/cpu, tests/api):
# tiny_model WORK EPOCHS [EXTRA_TOML] writes a small learnable IDX dataset (256 training and
# 64 test images of 16x16 pixels, 4 classes; tests/mpi/make_tiny_dataset.py) into WORK/data
# and a config for a 2-block model on it into WORK/tiny.toml, training EPOCHS epochs into
# WORK/run; EXTRA_TOML lines go into its [train] table.
tiny_model() {
  local work=$1 epochs=$2 extra=${3:-}
  python3 "$(dirname "${BASH_SOURCE[0]}")/mpi/make_tiny_dataset.py" "$work/data" 256 64 16
  cat > "$work/tiny.toml" << TOML
[model]
image_size = 16
channels = 1
patch_size = 4
dim = 32
depth = 2
heads = 2
mlp_dim = 64
num_classes = 4

[data]
format = "idx"
path = "$work/data"
mean = [0.3]
std = [0.3]

[optim]
lr = 3e-3

[train]
epochs = $epochs
batch_size = 32
out_dir = "$work/run"
$extra
TOML
}
