"""Files the PyTorch reference reads and writes, owned here: safetensors (the package is not
installed, and the format is simple enough to own) and Fashion-MNIST's IDX files."""
import json
import os
import struct
import tempfile
import zlib
from collections import OrderedDict

import numpy as np
import torch

from idx_files import find_idx, read_idx_bytes

_ST_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "F16": np.dtype("<f2")}


def write_safetensors(path, tensors, metadata=None, checksum=True):
    """Writes name -> array as little-endian F32, in the given order.

    Written to a temporary name and renamed, as minivit does, so that an interrupted run
    never leaves a truncated file that a later comparison would trip over.
    `minivit.checksum` is the CRC-32 of the whole data area (all tensors' bytes in file
    order, which is what minivit's reader verifies when the key is present).
    """
    header = OrderedDict()
    chunks = []
    offset = 0
    for name, arr in tensors.items():
        data = np.ascontiguousarray(np.asarray(arr, dtype="<f4")).tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(arr)),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    blob = b"".join(chunks)
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    meta.pop("minivit.checksum", None)  # stale once tensors change; recomputed below
    if checksum:
        meta["minivit.checksum"] = "%08x" % (zlib.crc32(blob) & 0xFFFFFFFF)
    header["__metadata__"] = meta
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    # The reference implementation pads the header with spaces to 8-byte alignment so
    # the data area can be memory-mapped as aligned floats; do the same.
    hbytes += b" " * (-len(hbytes) % 8)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp_", suffix=".safetensors", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(hbytes)))
            f.write(hbytes)
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_safetensors(path):
    """Returns (OrderedDict name -> float32 array in file order, metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("%s: too short for a safetensors header" % path)
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError("%s: header length %d exceeds file size %d" % (path, n, len(raw)))
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {}) or {}
    data = raw[8 + n:]
    if "minivit.checksum" in metadata:
        got = "%08x" % (zlib.crc32(data) & 0xFFFFFFFF)
        if got != metadata["minivit.checksum"]:
            raise ValueError("%s: checksum %s does not match metadata %s"
                             % (path, got, metadata["minivit.checksum"]))
    entries = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    tensors = OrderedDict()
    for name, info in entries:
        dt = info["dtype"]
        if dt == "BF16":
            # bf16 is the top half of an f32: widen by shifting into the high bits.
            b, e = info["data_offsets"]
            u = np.frombuffer(data[b:e], dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32)
        elif dt in _ST_DTYPES:
            b, e = info["data_offsets"]
            arr = np.frombuffer(data[b:e], dtype=_ST_DTYPES[dt]).astype(np.float32)
        else:
            raise ValueError("%s: tensor %s has unsupported dtype %s" % (path, name, dt))
        shape = tuple(info["shape"])
        if arr.size != int(np.prod(shape, dtype=np.int64)):
            raise ValueError("%s: tensor %s byte range does not match shape %s"
                             % (path, name, shape))
        tensors[name] = arr.reshape(shape).copy()
    return tensors, metadata


def read_idx(path):
    """Parses an IDX file (gzip or raw): big-endian magic 0x0000TTNN, NN dims, then data."""
    raw = read_idx_bytes(path)
    zero, dtype_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype_code != 0x08:
        raise SystemExit("error: %s: not an unsigned-byte IDX file" % path)
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise SystemExit("error: %s: %d bytes of data, dims %s" % (path, data.size, dims))
    return data.reshape(dims)


def parse_floats(text):
    return [float(t) for t in str(text).split(",") if t.strip()]


def load_batch(directory, n, mean, std, channels):
    images = read_idx(find_idx(directory, "train-images-idx3-ubyte"))[:n]
    labels = read_idx(find_idx(directory, "train-labels-idx1-ubyte"))[:n]
    if images.ndim == 3:
        images = images[:, None]  # (N, 1, H, W)
    if images.shape[1] != channels:
        raise SystemExit("error: data has %d channels, model %d" % (images.shape[1], channels))
    mean = np.asarray(mean * (channels if len(mean) == 1 else 1), np.float32).reshape(1, -1, 1, 1)
    std = np.asarray(std * (channels if len(std) == 1 else 1), np.float32).reshape(1, -1, 1, 1)
    x = (images.astype(np.float32) / 255.0 - mean) / std
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(labels.astype(np.int64))
