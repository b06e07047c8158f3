#!/usr/bin/env python3
"""Writes a small learnable dataset as raw IDX files (train-*/t10k-* names) into DIR:
SIZE x SIZE grey images of 4 classes, class k a bright square at its own place over seeded
noise. Pure Python, so the MPI tests need nothing beyond python3.

usage: make_tiny_dataset.py DIR [N_TRAIN N_TEST SIZE]
"""
import os
import random
import struct
import sys


def write_split(directory, prefix, n, size, rng):
    images = bytearray(struct.pack(">IIII", 0x803, n, size, size))
    labels = bytearray(struct.pack(">II", 0x801, n))
    for _ in range(n):
        label = rng.randrange(4)
        labels.append(label)
        cx, cy = (label * 3) % (size - 3), (label * 5 + 1) % (size - 3)
        for y in range(size):
            for x in range(size):
                v = rng.randrange(80)
                if cx <= x < cx + 4 and cy <= y < cy + 4:
                    v += 170
                images.append(v)
    with open(os.path.join(directory, prefix + "-images-idx3-ubyte"), "wb") as f:
        f.write(images)
    with open(os.path.join(directory, prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(labels)


def main():
    directory = sys.argv[1]
    n_train, n_test, size = (int(a) for a in sys.argv[2:5]) if len(sys.argv) >= 5 else (500, 100, 16)
    os.makedirs(directory, exist_ok=True)
    rng = random.Random(7)
    write_split(directory, "train", n_train, size, rng)
    write_split(directory, "t10k", n_test, size, rng)


if __name__ == "__main__":
    main()
