#!/usr/bin/env bash
# The runs that moved configs/fashion_mnist_best.toml from its first model shape (6 blocks, a
# CLS token) to the default config's (4 blocks, mean pooling, stochastic depth 0.1): the two
# under the best recipe's training (padded crops, flips, label smoothing 0.1, lr 3e-3) at the
# same compute (24 epochs of 6 blocks against 36 of 4), the 4-block shape at twice that
# length, both shapes filling the same wall clock on both cores (65 epochs of 6 blocks, 90
# of 4) of a 2-core Zen 3, and the 4-block shape filling the hour of a 2-core AVX-512 Zen 4
# (150 epochs, seeds 0, 1 and 2; seed 2 also keeps the weights' moving average, which leaves
# the training unchanged and is tested beside the weights). Every run pins its whole recipe (below), so the figures stay
# reproducible as the config file moves on; prints a table of test top-1 on
# last.safetensors, the last epoch's validation and training accuracy, and training speed.
#
# Usage: experiments/fashion_mnist_best/fashion_mnist_best_shape.sh [MINIVIT_EXE] [OUT_DIR]
# Environment: THREADS (1: one run per core, two at a time, gives the same weights as a run
# on all cores), VARIANTS (default: every variant, as the `variants` line below lists
# them; the conv pair puts the conv stem, model.patch_embed = "conv", in front of the same
# blocks, and the pd05 runs drop half the patches in training (model.patch_drop = 0.5),
# each for the epochs that fill the same hour, the u10 pair turning that off for its last
# 10 epochs (train.unmasked_epochs); the pd07 runs drop 70% and end with 20, 16 or 28
# epochs on every patch).
# On one core of a 2-core AMD EPYC (Zen 3) with another run beside it, the first two take
# about an hour each; alone on both cores (THREADS=2) the third takes 45 min and the next two
# 54-56 min each. On the Zen 4, alone on both cores, a 150-epoch run takes about 56 min, and
# 175 epochs with bf16 products (it has AVX512_BF16) about 53; on a 2-core Intel Xeon with AMX
# tiles, 190 epochs with bf16 products on them about 57. On the Zen 3, alone on both cores,
# 125 epochs with half the patches dropped take about 51 min; on a day it ran 1.5x faster,
# b4_mean_pd07_u20_e260 took 63 min and b4_mean_pd07_u16_e205 57 min; on a slower day, with
# minivit's AVX2 product kernels, b4_mean_pd07_u16_e205_s1 took 56 min, b4_d96_pd07_u10_e115 (width
# 96, 6 heads, MLP 192) 55 min and b4_mean_conv_pd07_u13_e150 (conv stem, 70% dropped) 55 min.
# On the Zen 4 with bf16 products, b4_mean_pd07_u28_e420_bf16 (configs/fashion_mnist_best.toml
# from commit bb6fb8f) took 50 min, and its seed 1 57 min on a slower day.
# Figures: experiments/fashion_mnist_best/results.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../recipe_runs.sh"
recipe_setup fashion_mnist_best_shape "$@"
variants=${VARIANTS:-"b6_cls_e24 b4_mean_e36 b4_mean_e72 b6_cls_e65 b4_mean_e90 b4_mean_e150 b4_mean_e150_s1 b4_mean_e150_s2_ema b4_mean_e175_bf16 b4_mean_e190_bf16 b4_mean_e190_bf16_s1 b4_mean_e190_bf16_s2 b4_mean_conv_e140_bf16 b4_mean_conv_e140_bf16_s1 b4_mean_pd05_e125 b4_mean_pd05_e125_s1 b4_mean_pd05_u10_e122 b4_mean_pd05_u10_e122_s1 b4_mean_pd07_u20_e260 b4_mean_pd07_u16_e205 b4_mean_pd07_u16_e205_s1 b4_d96_pd07_u10_e115 b4_mean_conv_pd07_u13_e150 b4_mean_pd07_u28_e420_bf16 b4_mean_pd07_u28_e420_bf16_s1"}

# What every run shares: the best recipe's training. 4x4 patches (49 tokens), width 64, 4
# heads, MLP 128, AdamW (lr 3e-3, weight decay 0.05, 900 warm-up steps, then a cosine
# schedule), label smoothing 0.1, batch 128, 2-pixel padded crops and flips, no erasing, 5%
# of the training images for validation; fp32 products unless a variant says bf16.
shared=(--set model.patch_size=4 --set model.dim=64 --set model.heads=4 --set model.mlp_dim=128
        --set model.attention=scaled_dot --set model.pos_embed=learned --set model.dropout=0
        --set model.attention_dropout=0 --set model.patch_embed=linear --set model.stem_channels=32
        --set model.patch_drop=0 --set optim.lr=3e-3 --set optim.weight_decay=0.05 --set optim.beta1=0.9 --set optim.beta2=0.999 --set optim.schedule=cosine
        --set optim.warmup_steps=900 --set optim.min_lr=1e-5 --set optim.clip_grad_norm=1.0
        --set optim.label_smoothing=0.1 --set optim.ema_decay=0 --set data.augment=true
        --set data.crop_padding=2 --set data.hflip=0.5 --set data.erasing=0 --set data.mixup=0
        --set data.cutmix=0 --set data.val_fraction=0.05 --set train.batch_size=128
        --set train.seed=0 --set train.precision=fp32 --set train.unmasked_epochs=0)
sets_of() {
  case $1 in
    b6_cls_e24) echo "model.depth=6 model.pool=cls model.drop_path=0 train.epochs=24" ;;
    b4_mean_e36) echo "model.depth=4 model.pool=mean model.drop_path=0.1 train.epochs=36" ;;
    b4_mean_e72) echo "model.depth=4 model.pool=mean model.drop_path=0.1 train.epochs=72" ;;
    b6_cls_e65) echo "model.depth=6 model.pool=cls model.drop_path=0 train.epochs=65" ;;
    b4_mean_e90) echo "model.depth=4 model.pool=mean model.drop_path=0.1 train.epochs=90" ;;
    b4_mean_e150) echo "model.depth=4 model.pool=mean model.drop_path=0.1 train.epochs=150" ;;
    b4_mean_e150_s1) echo "model.depth=4 model.pool=mean model.drop_path=0.1 train.epochs=150 train.seed=1" ;;
    b4_mean_e150_s2_ema) echo "model.depth=4 model.pool=mean model.drop_path=0.1 train.epochs=150 train.seed=2 optim.ema_decay=0.9998" ;;
    b4_mean_e175_bf16) echo "model.depth=4 model.pool=mean model.drop_path=0.1 train.epochs=175 train.precision=bf16" ;;
    b4_mean_e190_bf16) echo "model.depth=4 model.pool=mean model.drop_path=0.1 train.epochs=190 train.precision=bf16" ;;
    b4_mean_e190_bf16_s1) echo "model.depth=4 model.pool=mean model.drop_path=0.1 train.epochs=190 train.precision=bf16 train.seed=1" ;;
    b4_mean_e190_bf16_s2) echo "model.depth=4 model.pool=mean model.drop_path=0.1 train.epochs=190 train.precision=bf16 train.seed=2" ;;
    b4_mean_conv_e140_bf16) echo "model.depth=4 model.pool=mean model.drop_path=0.1 model.patch_embed=conv train.epochs=140 train.precision=bf16" ;;
    b4_mean_conv_e140_bf16_s1) echo "model.depth=4 model.pool=mean model.drop_path=0.1 model.patch_embed=conv train.epochs=140 train.precision=bf16 train.seed=1" ;;
    b4_mean_pd05_e125) echo "model.depth=4 model.pool=mean model.drop_path=0.1 model.patch_drop=0.5 train.epochs=125" ;;
    b4_mean_pd05_e125_s1) echo "model.depth=4 model.pool=mean model.drop_path=0.1 model.patch_drop=0.5 train.epochs=125 train.seed=1" ;;
    b4_mean_pd05_u10_e122) echo "model.depth=4 model.pool=mean model.drop_path=0.1 model.patch_drop=0.5 train.epochs=122 train.unmasked_epochs=10" ;;
    b4_mean_pd05_u10_e122_s1) echo "model.depth=4 model.pool=mean model.drop_path=0.1 model.patch_drop=0.5 train.epochs=122 train.unmasked_epochs=10 train.seed=1" ;;
    b4_mean_pd07_u20_e260) echo "model.depth=4 model.pool=mean model.drop_path=0.1 model.patch_drop=0.7 train.epochs=260 train.unmasked_epochs=20" ;;
    b4_mean_pd07_u16_e205) echo "model.depth=4 model.pool=mean model.drop_path=0.1 model.patch_drop=0.7 train.epochs=205 train.unmasked_epochs=16" ;;
    b4_mean_pd07_u16_e205_s1) echo "model.depth=4 model.pool=mean model.drop_path=0.1 model.patch_drop=0.7 train.epochs=205 train.unmasked_epochs=16 train.seed=1" ;;
    b4_d96_pd07_u10_e115) echo "model.depth=4 model.pool=mean model.drop_path=0.1 model.dim=96 model.heads=6 model.mlp_dim=192 model.patch_drop=0.7 train.epochs=115 train.unmasked_epochs=10" ;;
    b4_mean_conv_pd07_u13_e150) echo "model.depth=4 model.pool=mean model.drop_path=0.1 model.patch_embed=conv model.patch_drop=0.7 train.epochs=150 train.unmasked_epochs=13" ;;
    b4_mean_pd07_u28_e420_bf16) echo "model.depth=4 model.pool=mean model.drop_path=0.1 model.patch_drop=0.7 train.epochs=420 train.unmasked_epochs=28 train.precision=bf16" ;;
    b4_mean_pd07_u28_e420_bf16_s1) echo "model.depth=4 model.pool=mean model.drop_path=0.1 model.patch_drop=0.7 train.epochs=420 train.unmasked_epochs=28 train.precision=bf16 train.seed=1" ;;
    *) echo "fashion_mnist_best_shape.sh: unknown variant '$1'" >&2; exit 2 ;;
  esac
}

train_variants "$root/configs/fashion_mnist_best.toml"
print_table
