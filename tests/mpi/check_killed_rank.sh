#!/usr/bin/env bash
# A rank killed outright (SIGKILL) ends the whole job, non-zero, within a minute; the last
# checkpoint rank 0 wrote is whole, and the run resumes from it on one process. A rank that
# stops answering (SIGSTOP) ends the job once the others have waited MINIVIT_MPI_TIMEOUT.
# usage: check_killed_rank.sh MINIVIT WORKDIR
source "$(dirname "$0")/common.sh"
write_config "$WORK/tiny.toml" "$WORK/run" 1000 constant

run_ranks 2 train --config "$WORK/tiny.toml" --out "$WORK/run" > "$WORK/run.log" 2>&1 &
launcher=$!
# Two epochs' checkpoints, so that one has been replaced while the job ran.
for _ in $(seq 600); do
  if [[ -f $WORK/run/metrics.jsonl ]] && [[ $(grep -c '"type":"epoch"' "$WORK/run/metrics.jsonl") -ge 2 ]]; then break; fi
  kill -0 $launcher 2> /dev/null || { cat "$WORK/run.log"; fail "the job ended early"; }
  sleep 0.1
done
[[ -f $WORK/run/last.safetensors ]] || { kill -9 $launcher; fail "no checkpoint after a minute"; }

# Rank 1: the process among the launcher's descendants whose environment names it.
rank1_of() {
  local pid
  for pid in $(pgrep -P "$1") $(pgrep -P "$(pgrep -d, -P "$1")" 2> /dev/null || true); do
    if tr '\0' '\n' < /proc/$pid/environ 2> /dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then echo "$pid"; fi
  done
}
victim=$(rank1_of $launcher)
[[ -n $victim ]] || { kill -9 $launcher; fail "rank 1's process not found"; }
kill -KILL "$victim"
start=$(date +%s)
status=0
wait $launcher || status=$?
elapsed=$(( $(date +%s) - start ))
tail -5 "$WORK/run.log"
echo "job ended $elapsed s after the kill, status $status"
(( status != 0 )) || fail "the job exited 0 after a rank was killed"
(( elapsed <= 60 )) || fail "the job took $elapsed s to end"
pgrep -f "$WORK/tiny.toml" > /dev/null && fail "processes of the job outlived it"

"$MINIVIT" info "$WORK/run/last.safetensors" > "$WORK/info.log" 2>&1 ||
  { cat "$WORK/info.log"; fail "last.safetensors is not readable"; }
step=$(sed -n 's/^step \([0-9]*\),.*/\1/p' "$WORK/info.log")
[[ -n $step ]] || { cat "$WORK/info.log"; fail "info names no step"; }
"$MINIVIT" train --resume "$WORK/run" --set train.max_steps=$((step + 26)) > "$WORK/resume.log" 2>&1 ||
  { cat "$WORK/resume.log"; fail "the run does not resume on one process"; }

MINIVIT_MPI_TIMEOUT=5 mpirun "${mpi_flags[@]}" -x MINIVIT_MPI_TIMEOUT -np 2 "$MINIVIT" train \
  --config "$WORK/tiny.toml" --out "$WORK/hung" > "$WORK/hung.log" 2>&1 &
launcher=$!
for _ in $(seq 600); do
  [[ -f $WORK/hung/last.safetensors ]] && break
  sleep 0.1
done
victim=$(rank1_of $launcher)
[[ -n $victim ]] || { kill -9 $launcher; fail "rank 1's process not found (hung run)"; }
kill -STOP "$victim"
start=$(date +%s)
status=0
wait $launcher || status=$?
elapsed=$(( $(date +%s) - start ))
echo "job with a stopped rank ended after $elapsed s, status $status"
(( status != 0 )) || fail "the job exited 0 with a rank stopped"
(( elapsed <= 60 )) || fail "the job took $elapsed s to end with a rank stopped"
grep -q "waited 5 s for the other ranks" "$WORK/hung.log" || { cat "$WORK/hung.log"; fail "no timeout message"; }
echo "PASS"
