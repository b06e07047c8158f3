#!/usr/bin/env bash
# Two "hosts" on one machine: two network namespaces joined by a veth pair, Open MPI's TCP
# transport between them (no shared memory), mpirun reaching the second namespace through
# an rsh agent that is `ip netns exec`. Trains the default model STEPS steps on 2 ranks of 1
# thread with MINIVIT_MPI_PROFILE=1, over the bare veth and with the link shaped to 1 Gbit/s
# (tc tbf), and appends the figures to experiments/mpi/results.jsonl. Needs root (netns).
# usage: experiments/mpi/two_hosts.sh [MINIVIT_MPI_EXE] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/../.."
minivit=$(realpath "${1:-build-mpi/minivit}")
steps=${2:-40}
out=experiments/mpi/results.jsonl
tmp=$(mktemp -d)
source experiments/study_model.sh
remove_namespaces() {
  ip netns del mvh1 2> /dev/null || true
  ip netns del mvh2 2> /dev/null || true
}
trap 'remove_namespaces; rm -rf "$tmp"' EXIT
remove_namespaces  # left by an earlier run that was killed

ip netns add mvh1
ip netns add mvh2
ip link add mvh1v type veth peer name mvh2v
ip link set mvh1v netns mvh1
ip link set mvh2v netns mvh2
for n in 1 2; do
  ip -n mvh$n link set mvh${n}v name eth0
  ip -n mvh$n addr add 10.78.0.$n/24 dev eth0
  ip -n mvh$n link set eth0 up
  ip -n mvh$n link set lo up
done

cat > "$tmp/agent.sh" << 'AGENT'
#!/bin/bash
# Open MPI's rsh agent: the "host" 10.78.0.N is the namespace mvhN.
host=$1
shift
exec ip netns exec "mvh${host##*.}" /bin/sh -c "$*"
AGENT
chmod +x "$tmp/agent.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MINIVIT_MPI_PROFILE=1
flags=(--host 10.78.0.1:1,10.78.0.2:1 --mca plm_rsh_agent "$tmp/agent.sh" --mca btl tcp,self
       --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 --bind-to none
       -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM -x MINIVIT_MPI_PROFILE)

# run LINK: one training run, its profile line as JSON
run() {
  local link=$1
  # The default config as it was when results.md was measured (study_model.sh).
  ip netns exec mvh1 mpirun "${flags[@]}" -np 2 "$minivit" train --config configs/fashion_mnist.toml \
    --out "$tmp/run_$link" "${study_model[@]}" --set train.max_steps=$steps --set train.threads=1 \
    > "$tmp/log" 2>&1
  python3 - "$link" "$(grep '^mpi profile:' "$tmp/log")" \
    "$(grep -o '([0-9]* img/s while training)' "$tmp/log" | grep -o '[0-9]*' | head -1)" >> "$out" << 'PY'
import json, re, sys
link, line, img_s = sys.argv[1], sys.argv[2], sys.argv[3]
m = re.search(r"(\d+) ranks, (\d+) steps: compute ([\d.]+) ms/step, waiting for the slowest rank "
              r"([\d.]+) ms/step, gradient allreduce ([\d.]+) ms/step \((\d+) calls\), (\d+) gradient bytes",
              line)
print(json.dumps({"ranks": int(m[1]), "threads_per_rank": 1, "hosts": 2, "link": link,
                  "steps": int(m[2]), "compute_ms": float(m[3]), "wait_ms": float(m[4]),
                  "allreduce_ms": float(m[5]), "allreduce_calls": int(m[6]),
                  "gradient_bytes": int(m[7]), "train_img_per_s": int(img_s)}))
PY
  tail -1 "$out"
}

run veth
for n in 1 2; do
  ip netns exec mvh$n tc qdisc add dev eth0 root tbf rate 1gbit burst 256kb latency 50ms
done
run veth_1gbit
