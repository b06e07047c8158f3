#!/usr/bin/env bash
# minivit's evaluation speed against ONNX Runtime's on the same trained model and the same 2
# cores: the checkpoint exported to ONNX through the PyTorch reference, both sides' test-set
# top-1 required to agree, then alternating rounds of `minivit bench` and ort_time.js
# (batch-128 throughput on 2 threads; batch-1 latency, each side's on 1 thread and on 2).
# Prints the entry and appends it to results.md.
#
# usage: experiments/onnxruntime/ort_compare.sh MINIVIT CHECKPOINT CONFIG
#   e.g. experiments/onnxruntime/ort_compare.sh build/minivit \
#          runs/fashion_mnist/last.safetensors configs/fashion_mnist.toml
# Run from the repository root. Settings from the environment (defaults are the recorded run):
#   ROUNDS=3            alternating rounds
#   CPUS=0,1            the two CPUs both sides are pinned to
#   BENCH_STEPS=100     bench's timed steps (training steps and evaluation batches)
#   ORT_RUNS=100        ONNX Runtime's timed batches (after ORT_WARMUP=10 untimed)
#   LATENCY_IMAGES=1000 single images timed by both (after 100 untimed on each side)
#   WORK=runs/ort       onnxruntime-node, the exported model and the round files
#   RESULTS=experiments/onnxruntime/results.md   where the entry goes; RECORD=0 skips it
set -euo pipefail

ORT_VERSION=1.30.0  # the newest 1.x release on npm on 2026-11-27; pinned, so reruns time one library
THREADS=2

die() {
  echo "error: $*" >&2
  exit 2
}

[[ $# -eq 3 ]] || die "expected 3 arguments, MINIVIT CHECKPOINT CONFIG (e.g. build/minivit runs/fashion_mnist/last.safetensors configs/fashion_mnist.toml), got $#"
minivit=$1
checkpoint=$2
config=$3
here=$(cd "$(dirname "$0")" && pwd)
[[ -f CMakeLists.txt && -d tests/reference ]] || die "run from the repository root (no tests/reference in $PWD)"
[[ -x $minivit && -f $minivit ]] || die "$minivit: expected the minivit executable"
[[ -f $checkpoint ]] || die "$checkpoint: expected a minivit checkpoint (.safetensors)"
[[ -f $config ]] || die "$config: expected the TOML config the checkpoint was trained with"

# The command as given, with the settings that differ from the recorded run's, for the entry.
cmdline="experiments/onnxruntime/ort_compare.sh $*"
for var in LATENCY_IMAGES ORT_WARMUP ORT_RUNS BENCH_STEPS CPUS ROUNDS; do
  if [[ -n ${!var+x} ]]; then cmdline="$var=${!var} $cmdline"; fi
done
ROUNDS=${ROUNDS:-3}
CPUS=${CPUS:-0,1}
BENCH_STEPS=${BENCH_STEPS:-100}
ORT_RUNS=${ORT_RUNS:-100}
ORT_WARMUP=${ORT_WARMUP:-10}
LATENCY_IMAGES=${LATENCY_IMAGES:-1000}
WORK=${WORK:-runs/ort}
RESULTS=${RESULTS:-$here/results.md}
RECORD=${RECORD:-1}
for var in ROUNDS BENCH_STEPS ORT_RUNS LATENCY_IMAGES; do
  [[ ${!var} =~ ^[1-9][0-9]*$ ]] || die "$var=${!var}: expected a whole number >= 1"
done
[[ $ORT_WARMUP =~ ^[0-9]+$ ]] || die "ORT_WARMUP=$ORT_WARMUP: expected a whole number >= 0"

python=/usr/bin/python3
for tool in node npm taskset lscpu git; do
  command -v "$tool" > /dev/null || die "$tool not found on PATH (needed: node and npm, taskset, lscpu, git)"
done
"$python" -c 'import torch, numpy' 2> /dev/null || die "$python cannot import torch and numpy"
pinned=$(taskset -c "$CPUS" nproc 2> /dev/null) || die "CPUS=$CPUS: taskset cannot pin to those CPUs"
[[ $pinned -eq $THREADS ]] || die "CPUS=$CPUS: expected $THREADS CPUs, taskset gives $pinned"
run() { taskset -c "$CPUS" "$@"; }

mkdir -p "$WORK"
module=$WORK/node_modules/onnxruntime-node/package.json
installed=$(node -p 'require(require("path").resolve(process.argv[1])).version' "$module" \
  2> /dev/null || true)
if [[ $installed != "$ORT_VERSION" ]]; then
  # The package carries its Linux x64 CPU library; its install script only fetches optional
  # CUDA parts, which the CPU provider never loads.
  echo "installing onnxruntime-node@$ORT_VERSION into $WORK" >&2
  npm install --ignore-scripts --no-save --no-audit --no-fund --loglevel=error \
    --prefix "$WORK" "onnxruntime-node@$ORT_VERSION" > /dev/null ||
    die "npm could not install onnxruntime-node@$ORT_VERSION into $WORK"
fi

export_dir=$WORK/model
"$python" "$here/export_onnx.py" "$checkpoint" "$config" "$export_dir" >&2
data=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["data"])' \
  "$export_dir/manifest.json")

# Correctness before speed: a faster wrong model is no comparison.
run "$minivit" eval --checkpoint "$checkpoint" --data "$data" --threads "$THREADS" \
  --json "$WORK/minivit_eval.json" > "$WORK/minivit_eval.log" 2>&1 ||
  die "$minivit eval failed on $checkpoint (its output: $WORK/minivit_eval.log)"
run node "$here/ort_check.js" --ort "$WORK" --dir "$export_dir" --threads "$THREADS" \
  > "$WORK/ort_check.json"
top1=$("$python" -c '
import json, sys
m, o = (json.load(open(p)) for p in sys.argv[1:])
print(round(m["top1"] * m["n"]), o["correct"], o["count"], "%.3e" % o["probe_max_abs_diff"])
' "$WORK/minivit_eval.json" "$WORK/ort_check.json")
read -r mv_correct ort_correct count diff <<< "$top1"
echo "top-1: minivit $mv_correct/$count, ONNX Runtime $ort_correct/$count; first test images' logits, torch against ONNX Runtime: max abs diff $diff" >&2
if [[ $mv_correct != "$ort_correct" ]]; then
  echo "error: top-1 differs: minivit eval gets $mv_correct of $count test images right, ONNX Runtime $ort_correct (the export or one of the two is wrong)" >&2
  exit 1
fi

rm -f "$WORK"/bench_*.json "$WORK"/latency2_*.json "$WORK"/ort[12]_*.json
ort_time=(node "$here/ort_time.js" --ort "$WORK" --dir "$export_dir"
  --latency-images "$LATENCY_IMAGES" --latency-warmup 100)
batch=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["batch_size"])' \
  "$export_dir/manifest.json")
load_before=$(cut -d' ' -f1 /proc/loadavg)
for round in $(seq "$ROUNDS"); do
  echo "round $round of $ROUNDS" >&2
  # The spin count the test suite uses: libgomp's default spins long enough at each barrier
  # to take a core from whatever else runs, ONNX Runtime's pool included.
  GOMP_SPINCOUNT=10000 run "$minivit" bench --config "$config" --set train.threads="$THREADS" \
    --steps "$BENCH_STEPS" --latency-images "$LATENCY_IMAGES" \
    --json "$WORK/bench_$round.json" > "$WORK/bench_$round.log" 2>&1 ||
    die "$minivit bench failed (its output: $WORK/bench_$round.log)"
  GOMP_SPINCOUNT=10000 run "$minivit" bench --config "$config" --set train.threads="$THREADS" \
    --steps 1 --warmup 0 --latency-images "$LATENCY_IMAGES" --latency-threads "$THREADS" \
    --json "$WORK/latency2_$round.json" > "$WORK/latency2_$round.log" 2>&1 ||
    die "$minivit bench --latency-threads $THREADS failed (its output: $WORK/latency2_$round.log)"
  run "${ort_time[@]}" --threads "$THREADS" --batch "$batch" --runs "$ORT_RUNS" \
    --warmup "$ORT_WARMUP" > "$WORK/ort2_$round.json"
  run "${ort_time[@]}" --threads 1 --runs 0 > "$WORK/ort1_$round.json"
done
run "${ort_time[@]}" --model floor.onnx --threads 1 --runs 0 > "$WORK/ort_floor.json"
load_after=$(cut -d' ' -f1 /proc/loadavg)

cpu_flag() { grep -qw "$1" <<< "$flags" && echo yes || echo no; }
flags=$(lscpu | sed -n 's/^Flags: *//p')
cpu="$THREADS cores ($CPUS) of $(lscpu | sed -n 's/^Model name: *//p'), family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p'); avx512f $(cpu_flag avx512f), avx512_bf16 $(cpu_flag avx512_bf16), amx_tile $(cpu_flag amx_tile), amx_bf16 $(cpu_flag amx_bf16); 1-minute load average $load_before before the rounds, $load_after after"
commit=$(git rev-parse --short HEAD)
# The binary may be newer than HEAD while kernels are being edited; say so in the entry.
if [[ -n $(git status --porcelain -- src include CMakeLists.txt) ]]; then
  commit="$commit (with uncommitted changes in src/, include/ or CMakeLists.txt)"
fi
entry=$("$python" "$here/summarise.py" "$WORK" "$ROUNDS" --date "$(date +%F)" \
  --commit "$commit" --cpu "$cpu" --command "$cmdline" --node "$(node --version)")
echo "$entry"
if [[ $RECORD != 0 ]]; then
  printf '\n%s\n' "$entry" >> "$RESULTS"
  echo "appended to $RESULTS" >&2
fi
