#!/usr/bin/env bash
# Single changes to the default config's recipe before patch dropout (configs/fashion_mnist.toml
# then: 4 blocks, mean pooling, drop path 0.1, lr 3e-3, 18 epochs, no augmentation, bf16
# products), each from the seeds it names, for the five-minute target: label smoothing, flips, both, a smaller
# validation split at the same number of training images seen, the conv stem
# (model.patch_embed = "conv") for the epochs that take the time of 18 without it, and patch
# dropout (model.patch_drop 0.5, 0.6, 0.7 and 0.25) for about the blocks' work of 6-9 epochs
# without it; pd70_e22 is configs/fashion_mnist.toml's recipe (commit 1b64bd1). Figures:
# experiments/fashion_mnist_default/results.md.
# Usage: experiments/fashion_mnist_default/fashion_mnist_default_single.sh [MINIVIT_EXE] [OUT_DIR]
# Environment: THREADS (1: one run per core, two at a time, gives the same weights as a run
# on all cores), VARIANTS (default: every variant, as the `variants` line below lists them).
# On a 2-core Intel Xeon with AMX tiles one run takes about 10 min on one thread with
# another beside it (the conv runs 13 min), 4-5 min alone on both; on a
# 2-core Zen 3 (AVX2) the patch-dropout runs take 11-12 min each, two at a time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../recipe_runs.sh"
recipe_setup fashion_mnist_default_single "$@"
variants=${VARIANTS:-"base_s0 base_s1 base_s2 ls_s0 ls_s1 flip_s0 ls_flip_s0 val05_e17_s0 conv_e14_s0 conv_e14_s1 conv_e14_s2 pd50_e17_s0 pd50_e17_s1 pd50_e17_s2 pd25_e12_s0 pd60_e17_s0 pd70_e22_s0 pd70_e22_s1 pd70_e22_s2"}

# What every run shares: the default config's recipe as the file held it before patch
# dropout, pinned.
shared=(--set model.patch_size=4 --set model.dim=64 --set model.depth=4 --set model.heads=4
        --set model.mlp_dim=128 --set model.pool=mean --set model.drop_path=0.1
        --set model.attention=scaled_dot --set model.pos_embed=learned --set model.dropout=0
        --set model.attention_dropout=0 --set model.patch_embed=linear --set model.stem_channels=32
        --set model.patch_drop=0 --set optim.lr=3e-3 --set optim.weight_decay=0.05
        --set optim.warmup_steps=400 --set optim.min_lr=1e-5 --set optim.clip_grad_norm=1.0
        --set optim.label_smoothing=0 --set data.augment=true --set data.crop_padding=0
        --set data.hflip=0 --set data.val_fraction=0.1 --set train.epochs=18
        --set train.batch_size=128 --set train.precision=bf16)
sets_of() {
  case $1 in
    base_s0) echo "train.seed=0" ;;
    base_s1) echo "train.seed=1" ;;
    base_s2) echo "train.seed=2" ;;
    ls_s0) echo "optim.label_smoothing=0.1 train.seed=0" ;;
    ls_s1) echo "optim.label_smoothing=0.1 train.seed=1" ;;
    flip_s0) echo "data.hflip=0.5 train.seed=0" ;;
    ls_flip_s0) echo "optim.label_smoothing=0.1 data.hflip=0.5 train.seed=0" ;;
    val05_e17_s0) echo "data.val_fraction=0.05 train.epochs=17 train.seed=0" ;;
    conv_e14_s0) echo "model.patch_embed=conv train.epochs=14 train.seed=0" ;;
    conv_e14_s1) echo "model.patch_embed=conv train.epochs=14 train.seed=1" ;;
    conv_e14_s2) echo "model.patch_embed=conv train.epochs=14 train.seed=2" ;;
    pd50_e17_s0) echo "model.patch_drop=0.5 train.epochs=17 train.seed=0" ;;
    pd50_e17_s1) echo "model.patch_drop=0.5 train.epochs=17 train.seed=1" ;;
    pd50_e17_s2) echo "model.patch_drop=0.5 train.epochs=17 train.seed=2" ;;
    pd25_e12_s0) echo "model.patch_drop=0.25 train.epochs=12 train.seed=0" ;;
    pd60_e17_s0) echo "model.patch_drop=0.6 train.epochs=17 train.seed=0" ;;
    pd70_e22_s0) echo "model.patch_drop=0.7 train.epochs=22 train.seed=0" ;;
    pd70_e22_s1) echo "model.patch_drop=0.7 train.epochs=22 train.seed=1" ;;
    pd70_e22_s2) echo "model.patch_drop=0.7 train.epochs=22 train.seed=2" ;;
    *) echo "fashion_mnist_default_single.sh: unknown variant '$1'" >&2; exit 2 ;;
  esac
}

train_variants "$root/configs/fashion_mnist.toml"
print_table
