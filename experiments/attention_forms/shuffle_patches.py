#!/usr/bin/python3
"""Helper of shuffle_patches.sh, standard library only.
write DATA OUT N: the first N test images of the IDX set in DATA as OUT/original/*.pgm and,
  with their 4x4 patches permuted, OUT/shuffled/*.pgm; their labels in OUT/labels.txt.
compare OUT FORM: how the predictions of OUT/FORM_original.json and OUT/FORM_shuffled.json
  differ."""
import json
import os
import struct
import sys

sys.dont_write_bytecode = True  # the test tree is read, never written
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "reference"))
from idx_files import find_idx, read_idx_bytes  # noqa: E402

GRID, PATCH, SIZE = 7, 4, 28


def permutation():
    """One fixed permutation of the 7x7 patch grid (the one the C++ test uses)."""
    order = list(range(GRID * GRID))
    for i in range(GRID * GRID - 1, 0, -1):
        j = (i * 17 + 5) % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def write(directory, out, count):
    images = read_idx_bytes(find_idx(directory, "t10k-images-idx3-ubyte"))[16:]
    labels = read_idx_bytes(find_idx(directory, "t10k-labels-idx1-ubyte"))[8:]
    order = permutation()
    for kind in ("original", "shuffled"):
        os.makedirs(os.path.join(out, kind), exist_ok=True)
    with open(os.path.join(out, "labels.txt"), "w") as f:
        for k in range(count):
            image = images[k * SIZE * SIZE:(k + 1) * SIZE * SIZE]
            moved = bytearray(SIZE * SIZE)
            for to, source in enumerate(order):
                for y in range(PATCH):
                    for x in range(PATCH):
                        moved[(to // GRID * PATCH + y) * SIZE + to % GRID * PATCH + x] = \
                            image[(source // GRID * PATCH + y) * SIZE + source % GRID * PATCH + x]
            for kind, pixels in (("original", image), ("shuffled", bytes(moved))):
                with open(os.path.join(out, kind, f"{k:05d}.pgm"), "wb") as g:
                    g.write(b"P5\n28 28\n255\n" + pixels)
            f.write(f"{labels[k]}\n")


def compare(out, form):
    with open(os.path.join(out, "labels.txt")) as f:
        labels = [int(line) for line in f]

    def top(kind):
        with open(os.path.join(out, f"{form}_{kind}.json")) as f:
            return [(p["top"][0]["index"], p["top"][0]["probability"])
                    for p in json.load(f)["predictions"]]

    a, b = top("original"), top("shuffled")
    same = sum(x[0] == y[0] for x, y in zip(a, b))
    change = max(abs(x[1] - y[1]) for x, y in zip(a, b))
    accuracy = lambda r: 100 * sum(p[0] == l for p, l in zip(r, labels)) / len(r)
    print(f"pos_embed {form}: {len(a)} test images, the same prediction after shuffling for "
          f"{same}; largest change of the top probability {change:.2e}; accuracy "
          f"{accuracy(a):.1f}% as they are, {accuracy(b):.1f}% shuffled")


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        compare(sys.argv[2], sys.argv[3])
