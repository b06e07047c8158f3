#!/usr/bin/env bash
# Bad input ends a job of two ranks with a non-zero status and one error line, from rank 0,
# whether every rank meets it (a bad config value, a missing dataset) or rank 0 alone (a run
# directory that already holds a run).
# usage: check_errors_once.sh MINIVIT WORKDIR
source "$(dirname "$0")/common.sh"
write_config "$WORK/tiny.toml" "$WORK/run" 1 constant

# expect_one_error NAME PATTERN ARGS...
expect_one_error() {
  local name=$1 pattern=$2
  shift 2
  local status=0
  timeout 60 mpirun "${mpi_flags[@]}" -np 2 "$MINIVIT" "$@" > "$WORK/$name.log" 2>&1 || status=$?
  cat "$WORK/$name.log"
  (( status != 0 )) || fail "$name: the job exited 0"
  (( status != 124 )) || fail "$name: the job hung"
  [[ $(grep -c '^minivit: error' "$WORK/$name.log") == 1 ]] || fail "$name: not exactly one error line"
  grep -q "$pattern" "$WORK/$name.log" || fail "$name: the error does not name '$pattern'"
}

expect_one_error bad_value "optim.lr" train --config "$WORK/tiny.toml" --set optim.lr=-1
expect_one_error no_dataset "$WORK/missing" train --config "$WORK/tiny.toml" --set data.path="$WORK/missing"
"$MINIVIT" train --config "$WORK/tiny.toml" --set train.max_steps=2 > /dev/null 2>&1 ||
  fail "the single-process run failed"
expect_one_error taken_directory "already holds a training run" train --config "$WORK/tiny.toml"
echo "PASS"
