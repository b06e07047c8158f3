#!/usr/bin/env bash
# Runs one minivit binary as an older CPU would: under `qemu-x86_64 -cpu MODEL` it must show
# a checkpoint (`info`), classify images (`predict`), evaluate a split (`eval`) and take a few
# training steps, and its probabilities must agree with the same binary run on this machine.
# Its training must say it took the product kernels EXPECTED names (the level chosen from
# what the emulated CPU reports, kernels/compute.h), and OPENBLAS_CORETYPE set to kernels the
# CPU cannot run must give a clear error or a note, not an illegal instruction.
# Exits 77 (CTest: skipped) when qemu-user is not installed.
# usage: check_under_qemu.sh MINIVIT WORKDIR CPU_MODEL EXPECTED
set -euo pipefail
minivit=$1
work=$2
cpu=$3
expected=$4
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if ! command -v qemu-x86_64 > /dev/null; then
  echo "qemu-x86_64 is not installed (Debian's qemu-user; scripts/install-deps.sh --reference): skipped"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"

fail() {
  echo "FAIL ($cpu): $*" >&2
  exit 1
}

source "$here/../tiny_model.sh"
tiny_model "$work" 8 "threads = 2"

# On this machine: a checkpoint, a few test images as PNG files, and the reference figures.
"$minivit" train --config "$work/tiny.toml" > /dev/null 2>&1 || fail "native training failed"
"$minivit" export --config "$work/tiny.toml" --split test --out "$work/png" > /dev/null 2>&1
mapfile -t images < <(find "$work/png" -name '*.png' | sort | head -n 6)
((${#images[@]} == 6)) || fail "export wrote fewer than 6 images"
ckpt=$work/run/last.safetensors
"$minivit" predict --checkpoint "$ckpt" --json "$work/native_predict.json" "${images[@]}" > /dev/null
"$minivit" eval --checkpoint "$ckpt" --json "$work/native_eval.json" > /dev/null

# Without OPENBLAS_CORETYPE: a core type forced for this machine (Haswell, say) would make
# OpenBLAS run that core's instructions on the emulated older CPU too.
emulated=(env -u OPENBLAS_CORETYPE qemu-x86_64 -cpu "$cpu" "$minivit")
"${emulated[@]}" info "$ckpt" > "$work/info.txt" || fail "info exited $?"
grep -q "minivit checkpoint" "$work/info.txt" || fail "info printed no checkpoint"
"${emulated[@]}" predict --checkpoint "$ckpt" --json "$work/qemu_predict.json" "${images[@]}" \
  > /dev/null || fail "predict exited $?"
"${emulated[@]}" eval --checkpoint "$ckpt" --json "$work/qemu_eval.json" > /dev/null ||
  fail "eval exited $?"
"${emulated[@]}" train --config "$work/tiny.toml" --set train.max_steps=3 --out "$work/qemu_train" \
  > /dev/null 2> "$work/qemu_train.txt" || fail "train exited $?"
grep -q "products on $expected" "$work/qemu_train.txt" ||
  fail "train did not take $expected: $(head -n 1 "$work/qemu_train.txt")"
[[ -f $work/qemu_train/last.safetensors ]] || fail "train wrote no checkpoint"

# OPENBLAS_CORETYPE set to kernels the emulated CPU cannot run: where OpenBLAS computes the
# products, one line that names the setting and a non-zero exit, not an illegal
# instruction; where minivit's own kernels do, the commands run and bench leaves OpenBLAS's
# comparison line out with that line's reason.
if [[ $expected == OpenBLAS ]]; then
  status=0
  env OPENBLAS_CORETYPE=Haswell qemu-x86_64 -cpu "$cpu" "$minivit" eval --checkpoint "$ckpt" \
    > /dev/null 2> "$work/coretype.txt" || status=$?
  ((status == 1)) || fail "eval with OPENBLAS_CORETYPE=Haswell exited $status, expected 1"
  grep -v '^qemu-x86_64: warning' "$work/coretype.txt" > "$work/coretype_lines.txt" || true
  (($(wc -l < "$work/coretype_lines.txt") == 1)) ||
    fail "expected one line on stderr, got: $(cat "$work/coretype_lines.txt")"
  grep -q "OPENBLAS_CORETYPE=Haswell: .*need AVX2 and FMA" "$work/coretype_lines.txt" ||
    fail "the error does not name the setting: $(cat "$work/coretype_lines.txt")"
else
  env OPENBLAS_CORETYPE=SkylakeX qemu-x86_64 -cpu "$cpu" "$minivit" bench --config \
    "$work/tiny.toml" --steps 2 --warmup 1 --latency-images 0 > "$work/coretype.txt" 2>&1 ||
    fail "bench with OPENBLAS_CORETYPE=SkylakeX exited $?"
  grep -q "OpenBLAS not measured: OPENBLAS_CORETYPE=SkylakeX" "$work/coretype.txt" ||
    fail "bench did not say why OpenBLAS was not measured: $(tail -n 3 "$work/coretype.txt")"
fi

# Another CPU takes other kernels (OpenBLAS's for its family, or minivit's own where they
# fit), which round differently: the same classes, probabilities within 1e-4, the loss within
# 1e-4 relative.
python3 - "$work" "$cpu" << 'PY'
import json, sys
work, cpu = sys.argv[1], sys.argv[2]
native = json.load(open(work + "/native_predict.json"))["predictions"]
emulated = json.load(open(work + "/qemu_predict.json"))["predictions"]
worst = 0.0
for a, b in zip(native, emulated):
    assert a["top"][0]["index"] == b["top"][0]["index"], (cpu, a["image"], "class differs")
    pa = {t["index"]: t["probability"] for t in a["top"]}
    pb = {t["index"]: t["probability"] for t in b["top"]}
    for k in pa:
        worst = max(worst, abs(pa[k] - pb.get(k, 0.0)))
assert worst <= 1e-4, (cpu, "probabilities differ by", worst)
ne = json.load(open(work + "/native_eval.json"))
qe = json.load(open(work + "/qemu_eval.json"))
assert abs(ne["loss"] - qe["loss"]) <= 1e-4 * abs(ne["loss"]), (cpu, ne["loss"], qe["loss"])
assert abs(ne["top1"] - qe["top1"]) <= 1.0 / ne["n"] + 1e-9, (cpu, ne["top1"], qe["top1"])
print("%s: info, predict, eval and 3 training steps ran; classes agree, probabilities within "
      "%.1e, eval loss %.6f against %.6f, top-1 %.4f against %.4f"
      % (cpu, worst, qe["loss"], ne["loss"], qe["top1"], ne["top1"]))
PY
