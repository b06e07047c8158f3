#!/usr/bin/env bash
# Two ranks train the model one process trains: the same global batch, learning rate, data
# order, augmentation, dropout masks and drop-path draws, so every tensor ends within 1e-4
# (relative) of the single process's (see compare in common.sh for AdamW's qkv bias), and
# the two ranks' weights are identical (the trainer compares them and says so).
# usage: check_matches_one_process.sh MINIVIT WORKDIR
source "$(dirname "$0")/common.sh"
write_config "$WORK/tiny.toml" "$WORK/one" 2 cosine 0.2

# SGD first: no normalisation of the gradient, so every tensor must agree within 1e-4, the
# weights' moving average included.
sgd=(--set optim.name=sgd --set optim.lr=0.05 --set optim.ema_decay=0.9)
"$MINIVIT" train --config "$WORK/tiny.toml" --out "$WORK/one_sgd" "${sgd[@]}" > "$WORK/one_sgd.log" 2>&1 ||
  { cat "$WORK/one_sgd.log"; fail "the single process failed (SGD)"; }
run_ranks 2 train --config "$WORK/tiny.toml" --out "$WORK/two_sgd" "${sgd[@]}" > "$WORK/two_sgd.log" 2>&1 ||
  { cat "$WORK/two_sgd.log"; fail "the two ranks failed (SGD)"; }
compare "$WORK/two_sgd/last.safetensors" "$WORK/one_sgd/last.safetensors"
compare "$WORK/two_sgd/ema.safetensors" "$WORK/one_sgd/ema.safetensors"

# AdamW, the default.
"$MINIVIT" train --config "$WORK/tiny.toml" --out "$WORK/one" > "$WORK/one.log" 2>&1 ||
  { cat "$WORK/one.log"; fail "the single process failed"; }
run_ranks 2 train --config "$WORK/tiny.toml" --out "$WORK/two" > "$WORK/two.log" 2>&1 ||
  { cat "$WORK/two.log"; fail "the two ranks failed"; }
cat "$WORK/two.log"

grep -q "replicas: all 2 ranks hold the same weights" "$WORK/two.log" ||
  fail "the ranks did not confirm identical weights"
# Rank 0 alone prints: one opening line, one test line.
[[ $(grep -c "^minivit train:" "$WORK/two.log") == 1 ]] || fail "more than one rank announced the run"
[[ $(grep -c "^test (last.safetensors" "$WORK/two.log") == 1 ]] || fail "more than one rank evaluated"
grep -q "2 ranks x 1 threads" "$WORK/two.log" || fail "the opening line does not name the ranks"
for f in last best; do compare "$WORK/two/$f.safetensors" "$WORK/one/$f.safetensors" attn.qkv.bias=1e-3; done
echo "PASS"
