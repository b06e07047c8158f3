#!/usr/bin/env bash
# The attention forms side by side on Fashion-MNIST: each form of model.attention (and,
# with the default form, each model.pos_embed and model.pool choice) trained with the same
# budget from the same seeds. For every run it keeps the test accuracy, the training speed
# and the attention maps of the same test images at step 0 and at the end; summarise.py
# turns them into results.md (the table) and results.jsonl, and grids/ holds one attention
# grid per variant for the first of those images.
#
# Usage: experiments/attention_forms/run.sh [MINIVIT_EXE] [OUT_DIR]
# Environment: EPOCHS (10), SEEDS ("0 1"), IMAGES (16 test images for the maps), THREADS (0:
# all cores), VARIANTS (default: every variant, as the `variants` line below lists them),
# EXTRA (more --set arguments for every run, e.g. a shorter budget to try it).
# A full run is 14 trainings of the default config's 10 epochs: about two and a half hours
# on 2 cores. Run it on an otherwise idle machine; the speeds are only comparable then.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
minivit=$(realpath "${1:-$root/build/minivit}")
out=$(realpath -m "${2:-$root/runs/attention_forms}")
config=$root/configs/fashion_mnist.toml
epochs=${EPOCHS:-10}
seeds=${SEEDS:-"0 1"}
images=${IMAGES:-16}
threads=${THREADS:-0}
variants=${VARIANTS:-"scaled_dot dot additive cosine sincos2d no_pos_embed mean_pool"}
read -r -a extra <<< "${EXTRA:-}"
# The study's base: the default config as it was when the study was run, so that its results
# stay reproducible as the config file moves on.
source "$root/experiments/study_model.sh"
base=("${study_model[@]}" --set model.attention=scaled_dot --set model.pos_embed=learned)

sets_of() {
  case $1 in
    scaled_dot | dot | additive | cosine) echo "--set model.attention=$1" ;;
    sincos2d) echo "--set model.pos_embed=sincos2d" ;;
    no_pos_embed) echo "--set model.pos_embed=none" ;;
    mean_pool) echo "--set model.pool=mean" ;;
    *) echo "run.sh: unknown variant '$1'" >&2; exit 2 ;;
  esac
}

# maps CHECKPOINT DIR: the attention maps of test images 0 .. images-1.
maps() {
  for ((i = 0; i < images; ++i)); do
    "$minivit" attention --checkpoint "$1" --index $i --out "$2/$i" > /dev/null
  done
}

mkdir -p "$out"
for variant in $variants; do
  read -r -a sets <<< "$(sets_of "$variant")"
  for seed in $seeds; do
    dir=$out/$variant/seed$seed
    if [[ -f $dir/run/eval.json ]]; then
      echo "$variant seed $seed: done before, kept"
      continue
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    common=(--config "$config" "${base[@]}" "${sets[@]}" --set train.seed="$seed"
            --set train.threads="$threads")
    # Step 0: one step at a learning rate too small to move a float32 weight, so the
    # checkpoint holds the initial weights with the run's metadata.
    "$minivit" train "${common[@]}" --set train.max_steps=1 --set optim.lr=1e-30 \
      --set optim.warmup_steps=0 --out "$dir/init" > "$dir/init.log" 2>&1
    maps "$dir/init/last.safetensors" "$dir/maps_init"
    echo "$variant seed $seed: training $epochs epochs"
    "$minivit" train "${common[@]}" --set train.epochs="$epochs" "${extra[@]}" --out "$dir/run" \
      > "$dir/train.log" 2>&1
    maps "$dir/run/last.safetensors" "$dir/maps_end"
    tail -n 2 "$dir/train.log"
  done
done
/usr/bin/python3 "$here/summarise.py" "$out" --variants $variants --seeds $seeds --images "$images"
