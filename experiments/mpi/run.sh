#!/usr/bin/env bash
# Data-parallel training over MPI on one machine: the default Fashion-MNIST model (batch 128)
# trained STEPS steps on R = 1, 2 and 4 ranks (4 only oversubscribed on a 2-core machine),
# with MINIVIT_MPI_PROFILE=1, which makes rank 0 report where its step time went: the
# forward/backward of its shard ("compute"), waiting for the slowest rank (a barrier the
# profile adds) and the gradient allreduce itself. Also one process with 1 and 2 threads.
# Writes experiments/mpi/results.jsonl (one object per run) and prints a table.
# usage: experiments/mpi/run.sh [MINIVIT_MPI_EXE] [STEPS]   (a build with -DMINIVIT_MPI=ON)
set -euo pipefail
cd "$(dirname "$0")/../.."
minivit=${1:-build-mpi/minivit}
steps=${2:-40}
out=experiments/mpi/results.jsonl
tmp=$(mktemp -d)
source experiments/study_model.sh
trap 'rm -rf "$tmp"' EXIT
flags=(--oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none)
[[ $(id -u) -eq 0 ]] && flags+=(--allow-run-as-root)
: > "$out"

# run RANKS THREADS: one training run, its profile line turned into JSON
run() {
  local ranks=$1 threads=$2 dir=$tmp/r$1t$2
  # The default config as it was when results.md was measured (study_model.sh).
  local cmd=("$minivit" train --config configs/fashion_mnist.toml --out "$dir" "${study_model[@]}"
             --set train.max_steps=$steps --set train.threads=$threads)
  if ((ranks == 1)); then
    MINIVIT_MPI_PROFILE=1 "${cmd[@]}" > "$tmp/log" 2>&1
  else
    MINIVIT_MPI_PROFILE=1 mpirun "${flags[@]}" -x MINIVIT_MPI_PROFILE -np "$ranks" "${cmd[@]}" > "$tmp/log" 2>&1
  fi
  local line
  line=$(grep '^mpi profile:' "$tmp/log")
  local img_s
  img_s=$(grep -o '([0-9]* img/s while training)' "$tmp/log" | grep -o '[0-9]*' | head -1)
  python3 - "$ranks" "$threads" "$line" "$img_s" >> "$out" << 'PY'
import json, re, sys
ranks, threads, line, img_s = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
m = re.search(r"(\d+) steps: compute ([\d.]+) ms/step, waiting for the slowest rank ([\d.]+) "
              r"ms/step, gradient allreduce ([\d.]+) ms/step \((\d+) calls\), (\d+) gradient bytes",
              line)
print(json.dumps({"ranks": ranks, "threads_per_rank": threads, "steps": int(m[1]),
                  "compute_ms": float(m[2]), "wait_ms": float(m[3]), "allreduce_ms": float(m[4]),
                  "allreduce_calls": int(m[5]), "gradient_bytes": int(m[6]),
                  "train_img_per_s": int(img_s)}))
PY
  tail -1 "$out"
}

run 1 1
run 1 2
run 2 1
run 4 1
