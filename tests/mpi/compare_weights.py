#!/usr/bin/env python3
"""Compares the tensors of two safetensors files: every tensor of A must be in B with the same
shape and lie within TOL of it, relative (|a - b| / |b|, L2 norms over the tensor). Pure
Python (no numpy), so the MPI tests need nothing beyond python3. SUFFIX=TOL gives the tensors
whose names end in SUFFIX a tolerance of their own.

usage: compare_weights.py A B [TOL [SUFFIX=TOL ...]]
exit 0: all within tolerance; 1: not; 2: unreadable
"""
import json
import math
import struct
import sys
from array import array


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: {name} is {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        values = array("f")
        values.frombytes(data[base + begin:base + end])
        if sys.byteorder != "little":
            values.byteswap()
        tensors[name] = (tuple(info["shape"]), values)
    return tensors


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    tol = float(sys.argv[3]) if len(sys.argv) >= 4 else 1e-4
    own = {k: float(v) for k, v in (a.split("=", 1) for a in sys.argv[4:])}
    try:
        a, b = read_safetensors(sys.argv[1]), read_safetensors(sys.argv[2])
    except (OSError, ValueError, KeyError) as e:
        print(f"compare_weights: {e}", file=sys.stderr)
        return 2
    worst, bad = 0.0, []
    for name, (shape, va) in a.items():
        if name not in b or b[name][0] != shape:
            bad.append(f"{name}: missing or of another shape in {sys.argv[2]}")
            continue
        vb = b[name][1]
        diff = math.sqrt(sum((x - y) ** 2 for x, y in zip(va, vb)))
        norm = math.sqrt(sum(y * y for y in vb))
        rel = diff / norm if norm > 0 else diff
        limit = next((t for suffix, t in own.items() if name.endswith(suffix)), tol)
        if limit == tol:
            worst = max(worst, rel)
        if not rel <= limit:
            bad.append(f"{name}: relative difference {rel:.3g} > {limit:g}")
    if len(a) != len(b):
        bad.append(f"{len(a)} tensors against {len(b)}")
    for line in bad:
        print(f"compare_weights: {line}", file=sys.stderr)
    print(f"compare_weights: {len(a)} tensors, largest relative difference {worst:.3g} (tolerance {tol:g})"
          + "".join(f"; {s} within {t:g}" for s, t in own.items()))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
