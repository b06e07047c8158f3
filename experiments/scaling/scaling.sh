#!/usr/bin/env bash
# Throughput study: minivit and PyTorch (Debian's python3-torch, same machine, same OpenBLAS)
# side by side, training and evaluating the default Fashion-MNIST model while one factor
# varies: batch size, token count (patch size), depth, threads.
# Adds a dated entry (date, commit, CPU, command, then the table) at the end of
# experiments/scaling/results.md, and every figure both benchmarks reported to
# experiments/scaling/results.jsonl, one line per row with the date and commit.
# Usage: experiments/scaling/scaling.sh [MINIVIT_EXE]   (run on an otherwise idle machine)
# Both sides build the model of experiments/study_model.sh, the CLS-token form without drop
# path (the reference's bench has neither mean pooling nor drop path), whatever the config
# file chooses; depth, patch size, batch and threads vary from there.
set -euo pipefail
cd "$(dirname "$0")/../.."
minivit=${1:-build/minivit}
config=configs/fashion_mnist.toml
python=/usr/bin/python3
torch_ok=0
"$python" -c "import torch" 2>/dev/null && torch_ok=1
out_md=experiments/scaling/results.md
out_jsonl=experiments/scaling/results.jsonl
tmp=$(mktemp -d)
source experiments/study_model.sh
trap 'rm -rf "$tmp"' EXIT
: > "$tmp/run.jsonl"

# run NAME BATCH PATCH DEPTH THREADS
run() {
  local name=$1 batch=$2 patch=$3 depth=$4 threads=$5
  local steps=$((2560 / batch)); ((steps < 5)) && steps=5
  [[ $patch == 2 ]] && steps=$((steps / 2 > 3 ? steps / 2 : 3))
  "$minivit" bench --config "$config" --steps $steps --warmup 2 --json "$tmp/m.json" \
    "${study_model[@]}" --set train.batch_size=$batch --set model.patch_size=$patch \
    --set model.depth=$depth --set train.threads=$threads > /dev/null 2>&1
  local torch_json="null"
  if ((torch_ok)); then
    local tsteps=$((steps / 4 > 2 ? steps / 4 : 2))
    "$python" tests/reference/torch_vit.py bench --batch-size $batch --patch-size $patch \
      --depth $depth --threads $threads --steps $tsteps --warmup 1 --json "$tmp/t.json" > /dev/null 2>&1 &&
      torch_json=$(cat "$tmp/t.json")
  fi
  "$python" - "$name" "$batch" "$patch" "$depth" "$threads" "$tmp/m.json" "$torch_json" >> "$tmp/run.jsonl" <<'PY'
import json, sys
name, batch, patch, depth, threads, mpath, tjson = sys.argv[1:]
m = json.load(open(mpath))
t = json.loads(tjson)
print(json.dumps({"study": name, "batch": int(batch), "patch": int(patch), "tokens": m["tokens"],
                  "depth": int(depth), "threads": int(threads), "minivit": m, "torch": t}))
PY
  echo "done: $name batch=$batch patch=$patch depth=$depth threads=$threads" >&2
}

for b in 32 64 128 256 512; do run batch $b 4 6 2; done
for p in 7 4 2; do run tokens 128 $p 6 2; done
for d in 3 6 12; do run depth 128 4 $d 2; done
for t in 1 2; do run threads 128 4 6 $t; done

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) (family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs), model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | xargs); AVX-512: $(grep -qw avx512f /proc/cpuinfo && echo yes || echo no))"
"$python" - "$tmp/run.jsonl" "$out_md" "$out_jsonl" "$cpu" "$(nproc)" "$(date +%F)" \
  "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$minivit" <<'PY'
import json, sys
sys.path.insert(0, "experiments")
from bench_table import append_entry, append_rows, beside_torch, row, whole
run_jsonl, out_md, out_jsonl, cpu, cores, date, commit, minivit = sys.argv[1:]
rows = [json.loads(l) for l in open(run_jsonl)]
m0 = rows[0]["minivit"]
kernels = m0.get("gemm_kernels", "OpenBLAS " + m0["blas_kernels"])
lines = [f"## {date}, {commit}: {cpu}", "",
         f"`experiments/scaling/scaling.sh {minivit}`. Every figure is in `results.jsonl`, "
         f"the lines dated {date}.", "",
         f"Machine: {cpu}, {cores} cores; minivit's products through {kernels} "
         f"({m0['sgemm_gflops']:.0f} GFLOP/s on 6400x192x64, 2 threads); OpenBLAS {m0['blas_kernels']} "
         f"kernels ({m0.get('openblas_sgemm_gflops', m0['sgemm_gflops']):.0f} GFLOP/s on the same product) "
         "for PyTorch.", "",
         "| study | batch | tokens | depth | threads | minivit train img/s | torch train img/s | ratio | minivit eval img/s | torch eval img/s | ratio | minivit train GFLOP/s | attention time share | attention FLOP share | minivit peak RSS MB | torch peak RSS MB |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    m, t = r["minivit"], r["torch"] or {}
    lines.append(row([str(r[k]) for k in ("study", "batch", "tokens", "depth", "threads")]
                     + beside_torch(m, t)
                     + [f"{m['gflops']:.1f}", f"{100 * m['attention_time_share']:.0f}%",
                        f"{100 * m['attention_flop_share']:.0f}%", f"{m['peak_rss_mb']:.0f}",
                        whole(t.get("peak_rss_mb"))]))
append_entry(out_md, lines)
append_rows(out_jsonl, rows, date=date, commit=commit)
PY
