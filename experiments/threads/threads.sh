#!/usr/bin/env bash
# Many cores: minivit's training and evaluation at 1, 2, 4, ... threads up to the machine's
# cores (`minivit bench --threads-sweep`: the sgemm rate measured beside each count), and the
# PyTorch reference (`tests/reference/torch_vit.py bench`, with whatever torch $PYTHON
# imports) on the same model at the same thread counts, pinned to as many cores, at each
# batch size of BATCHES. The reference's attention is the explicit softmax(q k^T) v, as
# timm's without its fused kernel.
# Adds a dated entry (date, commit, CPU, command, then the table) at the end of
# experiments/threads/results.md, and every figure to experiments/threads/results.jsonl, one
# line per row with the date and commit.
#
# Usage: experiments/threads/threads.sh [MINIVIT_EXE] [CONFIG]
# Environment: BATCHES (default "128 512"), PYTHON (an interpreter that imports torch;
# default /usr/bin/python3, Debian's python3-torch), TORCH_STEPS (timed steps, default 20).
# Run it on an otherwise idle machine; without torch the PyTorch columns stay empty.
set -euo pipefail
cd "$(dirname "$0")/../.."
minivit=$(realpath "${1:-build/minivit}")
config=${2:-configs/fashion_mnist.toml}
batches=${BATCHES:-"128 512"}
python=${PYTHON:-/usr/bin/python3}
torch_steps=${TORCH_STEPS:-20}
out_md=experiments/threads/results.md
out_jsonl=experiments/threads/results.jsonl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

torch_ok=0
"$python" -c "import torch" 2>/dev/null && torch_ok=1
# The reference builds the model the config's [model] section describes. It has no drop path
# (a training-time draw that changes no shape) and computes in fp32, so minivit's side runs
# without drop path and with fp32 products too.
model_args=$("$python" - "$config" <<'PY'
import sys
try:
    import tomllib
except ImportError:
    sys.exit("threads.sh: reading the config needs Python 3.11 or later (tomllib)")
model = tomllib.load(open(sys.argv[1], "rb")).get("model", {})
keys = ("image_size", "channels", "patch_size", "dim", "depth", "heads", "mlp_dim",
        "num_classes", "attention", "pos_embed", "pool")
print(" ".join("--%s %s" % (k.replace("_", "-"), model[k]) for k in keys if k in model))
PY
)
read -r -a model_args <<< "$model_args"

: > "$tmp/run.jsonl"
for batch in $batches; do
  echo "batch $batch: minivit bench --threads-sweep" >&2
  "$minivit" bench --config "$config" --set train.batch_size="$batch" --set model.drop_path=0 \
    --set model.patch_drop=0 \
    --set train.precision=fp32 --threads-sweep --latency-images 0 --json "$tmp/minivit.json" > "$tmp/minivit.log" 2>&1 ||
    { cat "$tmp/minivit.log" >&2; exit 1; }
  for threads in $("$python" -c 'import json, sys; print(" ".join(str(r["threads"]) for r in json.load(open(sys.argv[1]))["threads_sweep"]))' "$tmp/minivit.json"); do
    torch_json=null
    if ((torch_ok)); then
      echo "batch $batch: PyTorch reference on $threads threads" >&2
      taskset -c "0-$((threads - 1))" "$python" tests/reference/torch_vit.py bench "${model_args[@]}" \
        --batch-size "$batch" --threads "$threads" --steps "$torch_steps" --warmup 2 \
        --json "$tmp/torch.json" > /dev/null && torch_json=$(cat "$tmp/torch.json")
    fi
    "$python" - "$batch" "$threads" "$tmp/minivit.json" "$torch_json" >> "$tmp/run.jsonl" <<'PY'
import json, sys
batch, threads, minivit_path, torch_text = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
m = json.load(open(minivit_path))
row = next(r for r in m["threads_sweep"] if r["threads"] == threads)
print(json.dumps({"batch": batch, "threads": threads, "cores": m["cores"],
                  "gemm_kernels": m["gemm_kernels"], "minivit": row, "torch": json.loads(torch_text)}))
PY
  done
done

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) (family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs), model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | xargs); AVX-512: $(grep -qw avx512f /proc/cpuinfo && echo yes || echo no))"
"$python" - "$tmp/run.jsonl" "$out_md" "$out_jsonl" "$cpu" "$config" "$(date +%F)" \
  "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "${1:-build/minivit}" "$batches" <<'PY'
import json, sys
sys.path.insert(0, "experiments")
from bench_table import append_entry, append_rows, beside_torch, row
run_jsonl, out_md, out_jsonl, cpu, config, date, commit, minivit, batches = sys.argv[1:]
rows = [json.loads(line) for line in open(run_jsonl)]
first = rows[0]
torch_version = next((r["torch"]["torch_version"] for r in rows if r["torch"]), None)
lines = [f"## {date}, {commit}: {cpu}", "",
         f"`BATCHES=\"{batches}\" experiments/threads/threads.sh {minivit} {config}`. Every figure "
         f"is in `results.jsonl`, the lines dated {date}.", "",
         f"Machine: {cpu}, {first['cores']} cores; `{config}`; minivit's products through "
         f"{first['gemm_kernels']}; PyTorch: "
         + (f"{torch_version}, the reference model of tests/reference, pinned to the first N cores."
            if torch_version else "not installed."), "",
         "| batch | threads | minivit train img/s | PyTorch train img/s | ratio | minivit eval img/s "
         "| PyTorch eval img/s | ratio | sgemm GFLOP/s | minivit train % of sgemm | minivit train "
         "scaling | minivit eval scaling | update and clearing, share of a step |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
one = {}
for r in rows:
    m, t = r["minivit"], r["torch"] or {}
    if r["threads"] == 1:
        one[r["batch"]] = m
    base = one.get(r["batch"])
    scale = lambda key: f"{m[key] / base[key]:.2f}x" if base else "-"
    lines.append(row([str(r["batch"]), str(r["threads"])] + beside_torch(m, t)
                     + [f"{m['sgemm_gflops']:.0f}", f"{m['train_percent_of_sgemm']:.0f}%",
                        scale("train_img_per_s"), scale("eval_img_per_s"),
                        f"{100 * m['serial_time_share']:.2f}%"]))
append_entry(out_md, lines)
append_rows(out_jsonl, rows, date=date, commit=commit)
PY
