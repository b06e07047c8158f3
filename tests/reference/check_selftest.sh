#!/usr/bin/env bash
# The reference checks itself before it checks minivit: `torch_vit.py selftest` on real
# Fashion-MNIST images, every model form (safetensors round trip, the contract's names,
# autograd against central finite differences in float64; README.md in this folder).
# Usage: check_selftest.sh MINIVIT_EXE SOURCE_DIR (minivit itself is not run)
# Exits 77 (reported as skipped by CTest) when PyTorch or the dataset is not installed.
set -euo pipefail
source_dir=$2
data=/usr/share/datasets/fashion-mnist
source "$source_dir/tests/reference/common.sh"
"${ref[@]}" selftest --data "$data" > "$tmp/selftest.log" 2>&1 || { cat "$tmp/selftest.log"; exit 1; }
tail -n 10 "$tmp/selftest.log"
