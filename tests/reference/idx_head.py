#!/usr/bin/env python3
"""Writes the first N_TRAIN training and N_TEST test images of an IDX dataset (Fashion-MNIST's
train-*/t10k-* files, gzip or raw) with their labels as raw IDX files into OUT, for the
checks that run the program on real images but need only a few: a run then reads and
evaluates a few images, not 70,000. Pure Python.

usage: idx_head.py DATA_DIR OUT_DIR N_TRAIN N_TEST
"""
import os
import struct
import sys

sys.dont_write_bytecode = True  # the test tree is read, never written
from idx_files import find_idx, read_idx_bytes  # noqa: E402


def head(raw, n, stem):
    """The header with the count set to n, and the first n items."""
    dims = raw[3]
    shape = struct.unpack(">%dI" % dims, raw[4:4 + 4 * dims])
    if shape[0] < n:
        sys.exit("idx_head.py: %s holds %d items, fewer than %d" % (stem, shape[0], n))
    item = 1
    for d in shape[1:]:
        item *= d
    start = 4 + 4 * dims
    return raw[:4] + struct.pack(">I", n) + raw[8:start] + raw[start:start + n * item]


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.strip().splitlines()[-1])
    data, out, n_train, n_test = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    os.makedirs(out, exist_ok=True)
    for split, n in (("train", n_train), ("t10k", n_test)):
        for stem in (split + "-images-idx3-ubyte", split + "-labels-idx1-ubyte"):
            with open(os.path.join(out, stem), "wb") as f:
                f.write(head(read_idx_bytes(find_idx(data, stem)), n, stem))


if __name__ == "__main__":
    main()
