"""IDX files (Fashion-MNIST's train-*/t10k-* images and labels), raw or gzip, as bytes.
Standard library only, for the helpers that need no numpy."""
import gzip
import os


def find_idx(directory, stem):
    """The path of STEM.gz or STEM in DIRECTORY; exits naming both when neither is there."""
    for name in (stem + ".gz", stem):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return path
    raise SystemExit("error: %s: no %s[.gz]" % (directory, stem))


def read_idx_bytes(path):
    """The file's bytes, gunzipped when they open with gzip's magic."""
    with open(path, "rb") as f:
        raw = f.read()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
