# Sourced by the recipe scripts (cifar10/cifar10_recipe.sh,
# fashion_mnist_best/fashion_mnist_best_shape.sh,
# fashion_mnist_default/fashion_mnist_default_single.sh): train each variant that has no
# result yet, then print the table of all that have one. The script calls recipe_setup, then
# defines variants, the array `shared` (the --set pins every run shares) and sets_of VARIANT
# (the keys=values that make the variant).

# recipe_setup NAME [MINIVIT_EXE] [OUT_DIR]: the arguments every recipe script takes. Sets
# `root` (the source tree), `minivit` (default: the build's), `out` (default: runs/NAME) and
# `threads` (THREADS from the environment, default 1: one run per core, two at a time, gives
# the same weights as a run on all cores).
recipe_setup() {
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  minivit=$(realpath "${2:-$root/build/minivit}")
  out=$(realpath -m "${3:-$root/runs/$1}")
  threads=${THREADS:-1}
}

# train_variants CONFIG [ARGS...]: ARGS go to every `minivit train` after the pins.
train_variants() {
  local config=$1
  shift
  local variant kv recipe sets
  # Named here, outside a command substitution, so that an unknown variant ends the script.
  for variant in $variants; do sets_of "$variant" > /dev/null; done
  mkdir -p "$out"
  for variant in $variants; do
    if [[ -f $out/$variant/eval.json ]]; then
      echo "$variant: done before, kept"
      continue
    fi
    recipe=$(sets_of "$variant")
    sets=()
    for kv in $recipe; do sets+=(--set "$kv"); done
    echo "$variant: training ($recipe)"
    "$minivit" train --config "$config" "${shared[@]}" "${sets[@]}" "$@" \
      --set train.threads="$threads" --out "$out/$variant" > "$out/$variant.log" 2>&1
  done
}

# print_table: test top-1 on last.safetensors, the last epoch's validation and training
# accuracy, and the img/s while training of every finished variant.
print_table() {
  local here variant
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  echo
  echo "| variant | recipe | test top-1 | validation | training (augmented) | img/s while training |"
  echo "|---|---|---|---|---|---|"
  for variant in $variants; do
    [[ -f $out/$variant/eval.json ]] || continue
    python3 "$here/run_row.py" "$out/$variant" "$variant" "$(sets_of "$variant")"
  done
}
