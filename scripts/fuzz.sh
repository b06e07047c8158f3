#!/usr/bin/env bash
# Fuzzes minivit's file readers with libFuzzer: builds the targets in fuzz/ with clang 14,
# AddressSanitizer and UndefinedBehaviorSanitizer into build-fuzz/, then runs each target for
# SECONDS (default 60), one after another, starting from the seeds in fuzz/corpus/<target>/
# and the inputs in fuzz/regressions/<target>/. New inputs go to a scratch corpus in
# build-fuzz/runs/<target>/, so the repository's corpus stays small.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]    (targets: fuzz/fuzz_<target>.cpp)
#
# A crash, sanitizer report, other exception type, hang (10 s per input), or allocation
# over 2048 MB is copied into fuzz/regressions/<target>/; the script then exits 1 naming
# the copies. Replay one with build-fuzz/fuzz_<target> FILE; the test suite replays them all
# ([fuzz] in tests/formats/test_fuzz_regressions.cpp).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
if [[ $# -gt 0 && "$1" =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
all_targets=()
for source in fuzz/fuzz_*.cpp; do
  name=${source#fuzz/fuzz_}
  all_targets+=("${name%.cpp}")
done
targets=("$@")
if ((${#targets[@]} == 0)); then targets=("${all_targets[@]}"); fi
for t in "${targets[@]}"; do
  if [[ ! -f fuzz/fuzz_$t.cpp ]]; then
    echo "fuzz.sh: no target '$t' (expected one of: ${all_targets[*]})" >&2
    exit 2
  fi
done

scripts/install-deps.sh --fuzz
cmake -S fuzz -B build-fuzz -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

export UBSAN_OPTIONS=print_stacktrace=1
# The level of the layers and kernels that the build instruments (fuzz/CMakeLists.txt).
export MINIVIT_ISA=x86-64
# Readers that take a path get each input as a file in $TMPDIR (fuzz/fuzz_entry.h); in
# memory that runs several times faster than on disk.
if [[ -d /dev/shm && -w /dev/shm ]]; then export TMPDIR=/dev/shm; fi
found=()
for t in "${targets[@]}"; do
  run=build-fuzz/runs/$t
  rm -rf "$run/artifacts"
  mkdir -p "$run/corpus" "$run/artifacts"
  inputs=("fuzz/corpus/$t")
  if [[ -d fuzz/regressions/$t ]]; then inputs+=("fuzz/regressions/$t"); fi
  # -max_len: room for the seeds to grow (the checkpoint seed is 4 KB).
  options=(-max_total_time="$seconds" -max_len=8192 -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10
           -print_final_stats=1 -artifact_prefix="$run/artifacts/")
  if [[ -f fuzz/dict/$t.dict ]]; then options+=(-dict="fuzz/dict/$t.dict"); fi
  echo "fuzz_$t: ${seconds} s, log in $run/log"
  status=0
  "build-fuzz/fuzz_$t" "${options[@]}" "$run/corpus" "${inputs[@]}" >"$run/log" 2>&1 || status=$?
  grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' "$run/log" | sed 's/^/  /' || true
  copied=0
  for artifact in "$run"/artifacts/*; do
    [[ -f $artifact ]] || continue
    mkdir -p "fuzz/regressions/$t"
    cp "$artifact" "fuzz/regressions/$t/"
    found+=("fuzz/regressions/$t/$(basename "$artifact")")
    copied=1
  done
  if ((status != 0)); then
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$run/log" | head -5 | sed 's/^/  /' || true
    if ((copied == 0)); then
      echo "fuzz_$t exited with status $status without a crashing input; see $run/log" >&2
      found+=("(fuzz_$t: see $run/log)")
    fi
  fi
done

if ((${#found[@]} > 0)); then
  echo "fuzz.sh: crashing inputs (fix the reader, keep the file as a regression):" >&2
  printf '  %s\n' "${found[@]}" >&2
  exit 1
fi
echo "fuzz.sh: no crashes in ${targets[*]} (${seconds} s each)"
