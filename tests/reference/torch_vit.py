#!/usr/bin/python3
"""Independent PyTorch reference for the minivit Vision Transformer.

The model is written by hand (timm is not available) but mirrors timm's
VisionTransformer(global_pool='token', class_token=True, qkv_bias=True, no pre-norm,
no fc_norm) closely enough that its state_dict names, shapes and numerics are the ones
in the project README (timm VisionTransformer, global_pool="token"). Its purpose is to be an oracle for the C++ code: gradients
(via `step` + `compare`), attention maps (`attention`) and speed (`bench`).

Besides that default it builds every model form minivit offers: attention scores
(scaled_dot, dot, additive, cosine), position embeddings (learned, sincos2d, none) and
pooling (cls, mean: timm's global_pool='avg', class_token=False). See README.md for the
tensor table of each form.

Run with Debian's interpreter: /usr/bin/python3 torch_vit.py SUBCOMMAND --help
"""
import argparse
import gzip
import json
import math
import os
import resource
import struct
import sys
import tempfile
import time
import zlib
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MODEL_KEYS = ("image_size", "channels", "patch_size", "dim", "depth", "heads", "mlp_dim",
              "dropout", "attention_dropout", "num_classes", "attention", "pos_embed", "pool")
# The model forms, by the words minivit's config uses; the first of each is the default,
# which is also what a file without the metadata key means.
FORM_CHOICES = OrderedDict([
    ("attention", ("scaled_dot", "dot", "additive", "cosine")),
    ("pos_embed", ("learned", "sincos2d", "none")),
    ("pool", ("cls", "mean")),
])
LN_EPS = 1e-6  # timm's ViT uses 1e-6, not torch's default 1e-5
LOGIT_SCALE_MAX = math.log(100.0)  # Swin v2 caps the cosine temperature at 100


# ----------------------------------------------------------------------------------------
# safetensors (the package is not installed, and the format is simple enough to own)
# ----------------------------------------------------------------------------------------

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


# ----------------------------------------------------------------------------------------
# Model (same module tree as timm, so state_dict() yields the contract's names)
# ----------------------------------------------------------------------------------------

class PatchEmbed(nn.Module):
    def __init__(self, channels, patch_size, dim):
        super().__init__()
        # A stride-P conv is the same as flattening each patch in (channel, row, column)
        # order and applying a linear map, which is how the contract defines it.
        self.proj = nn.Conv2d(channels, dim, patch_size, stride=patch_size)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)  # (B, N, D), patches row-major


class Attention(nn.Module):
    def __init__(self, dim, heads, attn_drop, proj_drop, form="scaled_dot"):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.scale = self.head_dim ** -0.5
        self.form = form
        self.qkv = nn.Linear(dim, 3 * dim, bias=True)
        if form == "additive":
            self.additive_v = nn.Parameter(torch.zeros(heads, self.head_dim))
        elif form == "cosine":
            # Swin v2's per-head log-temperature, and its initial value ln 10.
            self.logit_scale = nn.Parameter(torch.full((heads, 1, 1), math.log(10.0)))
        elif form not in ("scaled_dot", "dot"):
            raise ValueError("unknown attention form %r" % form)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)
        self.keep_attention = False  # set by attention_maps(); off in training
        self.last_attention = None

    def scores(self, q, k):
        """Pre-softmax scores e_ij for q, k of shape (B, H, T, Dh): (B, H, T, T)."""
        if self.form == "scaled_dot":
            return (q @ k.transpose(-2, -1)) * self.scale
        if self.form == "dot":
            return q @ k.transpose(-2, -1)
        if self.form == "additive":
            # Every query against every key, feature by feature: (B, H, Tq, Tk, Dh). Memory
            # grows with T^2 * D, which is fine for the small models this script checks.
            pair = torch.tanh(q.unsqueeze(3) + k.unsqueeze(2))
            return (pair * self.additive_v[None, :, None, None, :]).sum(-1)
        # cosine: as Swin v2 writes it, so the clamp passes no gradient while it is active.
        cos = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        return cos * torch.clamp(self.logit_scale, max=LOGIT_SCALE_MAX).exp()

    def forward(self, x):
        B, T, D = x.shape
        # The reshape order (3, H, Dh) fixes which rows of qkv.weight belong to q/k/v and
        # to which head; the C++ side must use the same split for weights to transfer.
        qkv = self.qkv(x).reshape(B, T, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = self.scores(q, k).softmax(dim=-1)
        if self.keep_attention:
            self.last_attention = attn.detach()  # before dropout: what the model "looks at"
        attn = self.attn_drop(attn)
        x = (attn @ v).transpose(1, 2).reshape(B, T, D)
        return self.proj_drop(self.proj(x))


class Mlp(nn.Module):
    def __init__(self, dim, hidden, drop):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()  # approximate='none': the exact erf form, as in timm
        self.drop1 = nn.Dropout(drop)
        self.fc2 = nn.Linear(hidden, dim)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x):
        return self.drop2(self.fc2(self.drop1(self.act(self.fc1(x)))))


class Block(nn.Module):
    def __init__(self, dim, heads, mlp_dim, drop, attn_drop, attention="scaled_dot"):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=LN_EPS)
        # timm applies the block's proj_drop inside Attention; no extra dropout here.
        self.attn = Attention(dim, heads, attn_drop, drop, attention)
        self.norm2 = nn.LayerNorm(dim, eps=LN_EPS)
        self.mlp = Mlp(dim, mlp_dim, drop)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return x


def sincos_2d_pos_embed(grid, dim, cls_row):
    """SimpleViT's posemb_sincos_2d (temperature 10000) as [1, T, D] float32 numpy.

    Evaluated in float64 and rounded once, so the file holds the formula's nearest floats.
    Patch (y, x) in row-major order gets [sin(x w), cos(x w), sin(y w), cos(y w)] with
    w_k = 10000^(-k / (D/4 - 1)), k < D/4; the CLS token, when there is one, gets zeros.
    """
    if dim % 4 or dim < 8:
        raise SystemExit("error: pos_embed sincos2d needs dim divisible by 4 and >= 8, got %d"
                         % dim)
    quarter = dim // 4
    omega = 1.0 / 10000.0 ** (np.arange(quarter, dtype=np.float64) / (quarter - 1))
    y, x = np.meshgrid(np.arange(grid, dtype=np.float64), np.arange(grid, dtype=np.float64),
                       indexing="ij")
    xw = x.reshape(-1, 1) * omega[None, :]
    yw = y.reshape(-1, 1) * omega[None, :]
    pe = np.concatenate([np.sin(xw), np.cos(xw), np.sin(yw), np.cos(yw)], axis=1)
    if cls_row:
        pe = np.concatenate([np.zeros((1, dim)), pe], axis=0)
    return pe[None].astype(np.float32)


class ViT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = dict(cfg)
        grid = cfg["image_size"] // cfg["patch_size"]
        D = cfg["dim"]
        self.pool = cfg.get("pool", "cls")
        pos = cfg.get("pos_embed", "learned")
        prefix = 1 if self.pool == "cls" else 0
        # Registered before patch_embed, as timm does, so state_dict() lists them first.
        self.cls_token = nn.Parameter(torch.zeros(1, 1, D)) if prefix else None
        if pos == "learned":
            self.pos_embed = nn.Parameter(torch.zeros(1, grid * grid + prefix, D))
        elif pos == "sincos2d":
            # A parameter that takes no gradient rather than a buffer, so it sits where
            # timm's learned one does and a timm model loads the file unchanged.
            self.pos_embed = nn.Parameter(
                torch.from_numpy(sincos_2d_pos_embed(grid, D, prefix == 1)), requires_grad=False)
        else:
            self.pos_embed = None
        self.patch_embed = PatchEmbed(cfg["channels"], cfg["patch_size"], D)
        # timm's pos_drop after adding pos_embed uses the same drop rate.
        self.pos_drop = nn.Dropout(cfg.get("dropout", 0.0))
        self.blocks = nn.ModuleList(
            Block(D, cfg["heads"], cfg["mlp_dim"], cfg.get("dropout", 0.0),
                  cfg.get("attention_dropout", 0.0), cfg.get("attention", "scaled_dot"))
            for _ in range(cfg["depth"]))
        # timm: the final norm before token pooling, or fc_norm after average pooling.
        if self.pool == "cls":
            self.norm = nn.LayerNorm(D, eps=LN_EPS)
        else:
            self.fc_norm = nn.LayerNorm(D, eps=LN_EPS)
        self.head = nn.Linear(D, cfg["num_classes"])

    def forward(self, x):
        x = self.patch_embed(x)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        if self.pos_embed is not None:
            x = x + self.pos_embed
        x = self.pos_drop(x)
        for blk in self.blocks:
            x = blk(x)
        if self.pool == "cls":
            return self.head(self.norm(x)[:, 0])
        return self.head(self.fc_norm(x.mean(dim=1)))


def expected_shapes(cfg):
    """The contract's tensor table, in the contract's file order, used to validate loaded
    files independently of torch. timm's tensors come in timm's order; minivit's own
    per-head attention tensors (additive_v, logit_scale) sit between attn.qkv and attn.proj."""
    D, C, P, M, K = cfg["dim"], cfg["channels"], cfg["patch_size"], cfg["mlp_dim"], cfg["num_classes"]
    H = cfg["heads"]
    N = (cfg["image_size"] // P) ** 2
    attention = cfg.get("attention", "scaled_dot")
    cls_pool = cfg.get("pool", "cls") == "cls"
    s = OrderedDict()
    if cls_pool:
        s["cls_token"] = (1, 1, D)
    if cfg.get("pos_embed", "learned") != "none":
        s["pos_embed"] = (1, N + 1 if cls_pool else N, D)
    s["patch_embed.proj.weight"] = (D, C, P, P)
    s["patch_embed.proj.bias"] = (D,)
    for i in range(cfg["depth"]):
        b = "blocks.%d." % i
        s[b + "norm1.weight"] = (D,)
        s[b + "norm1.bias"] = (D,)
        s[b + "attn.qkv.weight"] = (3 * D, D)
        s[b + "attn.qkv.bias"] = (3 * D,)
        if attention == "additive":
            s[b + "attn.additive_v"] = (H, D // H)
        elif attention == "cosine":
            s[b + "attn.logit_scale"] = (H, 1, 1)
        s[b + "attn.proj.weight"] = (D, D)
        s[b + "attn.proj.bias"] = (D,)
        s[b + "norm2.weight"] = (D,)
        s[b + "norm2.bias"] = (D,)
        s[b + "mlp.fc1.weight"] = (M, D)
        s[b + "mlp.fc1.bias"] = (M,)
        s[b + "mlp.fc2.weight"] = (D, M)
        s[b + "mlp.fc2.bias"] = (D,)
    final = "norm" if cls_pool else "fc_norm"
    s[final + ".weight"] = (D,)
    s[final + ".bias"] = (D,)
    s["head.weight"] = (K, D)
    s["head.bias"] = (K,)
    return s


def random_weights(cfg, seed):
    """Deliberately non-trivial weights, so every code path shows up in the gradients.

    Linear/conv weights are N(0, 1/fan_in) rather than timm's std 0.02: with 0.02 the
    attention logits are ~1e-3 and softmax is essentially uniform, so a wrong q/k split or
    scale would go unnoticed in both attention maps and gradients. Biases ~N(0, 0.1) and
    LayerNorm affine params 1 +- 0.1 / +-0.1, so a kernel that ignores them is caught.
    additive_v is N(0, 1/Dh) like a weight that sums over Dh features; logit_scale is
    ln 10 +- 0.2 per head, so a kernel that mixes up heads' temperatures is caught. A
    sincos2d pos_embed is not random: it is the fixed embedding itself.
    """
    g = torch.Generator().manual_seed(seed)
    out = OrderedDict()
    grid = cfg["image_size"] // cfg["patch_size"]
    for name, shape in expected_shapes(cfg).items():
        if name == "pos_embed" and cfg.get("pos_embed", "learned") == "sincos2d":
            out[name] = sincos_2d_pos_embed(grid, cfg["dim"], cfg.get("pool", "cls") == "cls")
            continue
        if name.endswith("norm1.weight") or name.endswith("norm2.weight") or name in (
                "norm.weight", "fc_norm.weight"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=g)
        elif name.endswith(".bias"):
            t = 0.1 * torch.randn(shape, generator=g)
        elif name in ("cls_token", "pos_embed"):
            t = 0.5 * torch.randn(shape, generator=g)
        elif name.endswith("attn.logit_scale"):
            t = math.log(10.0) + 0.2 * torch.randn(shape, generator=g)
        else:
            fan_in = int(np.prod(shape[1:]))
            t = torch.randn(shape, generator=g) / math.sqrt(fan_in)
        out[name] = t.numpy().astype(np.float32)
    return out


def model_metadata(cfg):
    # Values as TOML text, matching how minivit flattens its resolved config: strings
    # in double quotes (the form words need no escaping), floats and integers bare.
    meta = {}
    for k in MODEL_KEYS:
        v = cfg[k]
        if isinstance(v, str):
            meta["minivit.model." + k] = '"%s"' % v
        else:
            meta["minivit.model." + k] = repr(float(v)) if isinstance(v, float) else str(int(v))
    return meta


def form_from_metadata(metadata, key):
    """A form word from `minivit.model.KEY` (TOML string text); the default if absent."""
    text = metadata.get("minivit.model." + key)
    if text is None:
        return FORM_CHOICES[key][0]
    text = text.strip()
    word = text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'" else text
    if word not in FORM_CHOICES[key]:
        raise SystemExit("error: metadata minivit.model.%s = %s is not one of %s"
                         % (key, text, ", ".join(FORM_CHOICES[key])))
    return word


def config_from_weights(tensors, metadata, heads=None):
    """Model config from tensor shapes; heads (not visible in any shape) and the model
    form from metadata, image_size too when there is no pos_embed to read it from."""
    forms = {k: form_from_metadata(metadata, k) for k in FORM_CHOICES}
    D, C, P, _ = tensors["patch_embed.proj.weight"].shape
    if "pos_embed" in tensors:
        prefix = 1 if forms["pool"] == "cls" else 0
        grid = int(round(math.sqrt(tensors["pos_embed"].shape[1] - prefix)))
        image_size = grid * P
    elif "minivit.model.image_size" in metadata:
        image_size = int(metadata["minivit.model.image_size"])
    else:
        raise SystemExit("error: no pos_embed and no minivit.model.image_size in metadata")
    depth = 0
    while ("blocks.%d.norm1.weight" % depth) in tensors:
        depth += 1
    if heads is None:
        h = metadata.get("minivit.model.heads")
        if h is None:
            raise SystemExit("error: heads not in metadata (minivit.model.heads); pass --heads")
        heads = int(h)
    cfg = dict(image_size=image_size, channels=C, patch_size=P, dim=D, depth=depth, heads=heads,
               mlp_dim=tensors["blocks.0.mlp.fc1.weight"].shape[0],
               num_classes=tensors["head.weight"].shape[0],
               dropout=0.0, attention_dropout=0.0, **forms)
    if D % heads:
        raise SystemExit("error: dim %d not divisible by heads %d" % (D, heads))
    return cfg


def build_model(tensors, cfg, dtype=torch.float32):
    model = ViT(cfg)
    exp = expected_shapes(cfg)
    if set(exp) != set(tensors):
        missing = set(exp) - set(tensors)
        extra = set(tensors) - set(exp)
        raise SystemExit("error: tensor names differ from contract; missing %s extra %s"
                         % (sorted(missing), sorted(extra)))
    for n, s in exp.items():
        if tuple(tensors[n].shape) != s:
            raise SystemExit("error: %s has shape %s, expected %s" % (n, tensors[n].shape, s))
    if cfg.get("pos_embed", "learned") == "sincos2d":
        # The file's copy is what gets loaded, so that a step leaves it bit for bit as it
        # was; it must still be the formula's embedding, or the model is not the one named.
        want = model.pos_embed.detach().numpy().astype(np.float64)
        diff = float(np.abs(tensors["pos_embed"].astype(np.float64) - want).max())
        if diff > 1e-5:
            raise SystemExit("error: pos_embed differs from the sincos2d embedding by up to %.3e"
                             % diff)
    model.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in tensors.items()},
                          strict=True)
    return model.to(dtype)


def state_to_numpy(model, order):
    sd = model.state_dict()
    return OrderedDict((k, sd[k].detach().to(torch.float32).cpu().numpy()) for k in order)


# ----------------------------------------------------------------------------------------
# IDX data (Fashion-MNIST files)
# ----------------------------------------------------------------------------------------

def read_idx(path):
    """Parses an IDX file (gzip or raw): big-endian magic 0x0000TTNN, NN dims, then data."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    zero, dtype_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype_code != 0x08:
        raise SystemExit("error: %s: not an unsigned-byte IDX file" % path)
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise SystemExit("error: %s: %d bytes of data, dims %s" % (path, data.size, dims))
    return data.reshape(dims)


def find_idx(directory, stem):
    for name in (stem + ".gz", stem):
        p = os.path.join(directory, name)
        if os.path.exists(p):
            return p
    raise SystemExit("error: %s: no %s[.gz]" % (directory, stem))


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


# ----------------------------------------------------------------------------------------
# Subcommands
# ----------------------------------------------------------------------------------------

def set_threads(args):
    if getattr(args, "threads", 0):
        torch.set_num_threads(args.threads)


def cfg_from_args(args, forms=True):
    return {k: getattr(args, k) for k in MODEL_KEYS if forms or k not in FORM_CHOICES}


def cmd_init(args):
    cfg = cfg_from_args(args)
    if cfg["dim"] % cfg["heads"] or cfg["image_size"] % cfg["patch_size"]:
        raise SystemExit("error: dim %% heads and image_size %% patch_size must be 0")
    weights = random_weights(cfg, args.seed)
    build_model(weights, cfg)  # validates names/shapes round-trip through the module tree
    write_safetensors(args.out, weights, model_metadata(cfg))
    print("wrote %s (%d tensors, %d parameters)"
          % (args.out, len(weights), sum(w.size for w in weights.values())))


def cmd_step(args):
    set_threads(args)
    tensors, meta = read_safetensors(args.weights)
    cfg = config_from_weights(tensors, meta, args.heads)
    model = build_model(tensors, cfg)  # dropout 0 in cfg: train mode is then deterministic
    model.train()
    x, y = load_batch(args.data, args.batch_size, parse_floats(args.mean),
                      parse_floats(args.std), cfg["channels"])
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    grads = OrderedDict()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not p.requires_grad:
                # A fixed embedding (sincos2d): never trained, so written back untouched.
                grads[name] = torch.zeros_like(p)
                continue
            grads[name] = p.grad.detach().clone()
            p -= args.lr * p.grad
    write_safetensors(args.out, state_to_numpy(model, tensors.keys()), meta)
    if args.grads_out:
        write_safetensors(args.grads_out,
                          OrderedDict((k, grads[k].numpy()) for k in tensors), meta)
    print("loss %.8f" % loss.item())


def cmd_compare(args):
    a, _ = read_safetensors(args.a)
    b, _ = read_safetensors(args.b)
    base = read_safetensors(args.base)[0] if args.base else None
    ok = True
    if set(a) != set(b):
        print("names differ: only in A %s, only in B %s"
              % (sorted(set(a) - set(b)), sorted(set(b) - set(a))))
        ok = False
    worst = 0.0
    for name in [n for n in a if n in b]:
        ta, tb = a[name].astype(np.float64), b[name].astype(np.float64)
        if ta.shape != tb.shape:
            print("%-32s shape %s vs %s" % (name, ta.shape, tb.shape))
            ok = False
            continue
        if base is not None:
            if name not in base or base[name].shape != ta.shape:
                print("%-32s missing or mis-shaped in base" % name)
                ok = False
                continue
            # Updates, not weights: a one-step update is ~lr*grad, tiny next to the
            # weights, so comparing weights would hide almost any gradient bug.
            ta, tb = ta - base[name], tb - base[name]
        ref = np.linalg.norm(tb)
        rel = np.linalg.norm(ta - tb) / max(ref, 1e-30)
        if ref == 0 and np.linalg.norm(ta) == 0:
            rel = 0.0
        worst = max(worst, rel)
        flag = "FAIL" if rel > args.rtol else "ok"
        print("%-32s rel %.3e  |B| %.3e  %s" % (name, rel, ref, flag))
        ok = ok and rel <= args.rtol
    print("worst rel %.3e (rtol %.1e): %s" % (worst, args.rtol, "PASS" if ok else "FAIL"))
    return 0 if ok else 1


def attention_maps(model, x):
    """Softmax attention of every layer for one batch, as [layers, B, heads, T, T]."""
    for blk in model.blocks:
        blk.attn.keep_attention = True
    try:
        with torch.no_grad():
            logits = model(x)
        maps = torch.stack([blk.attn.last_attention for blk in model.blocks])
    finally:
        for blk in model.blocks:
            blk.attn.keep_attention = False
            blk.attn.last_attention = None
    return maps, logits


def cmd_attention(args):
    set_threads(args)
    tensors, meta = read_safetensors(args.weights)
    cfg = config_from_weights(tensors, meta, args.heads)
    model = build_model(tensors, cfg).eval()
    img = np.load(args.image_npy).astype(np.float32)
    want = (cfg["channels"], cfg["image_size"], cfg["image_size"])
    if img.shape != want:
        raise SystemExit("error: %s has shape %s, expected %s" % (args.image_npy, img.shape, want))
    maps, logits = attention_maps(model, torch.from_numpy(img)[None])
    out = maps[:, 0].numpy().astype(np.float32)  # [layers, heads, T, T]
    np.save(args.out, out)
    print("wrote %s shape %s; logits %s" % (args.out, out.shape,
                                             np.array2string(logits[0].numpy(), precision=4)))


def forward_flops(cfg):
    """Multiply-adds x2 of one image's forward pass (matmuls only; norms/softmax ignored).

    Every attention form is counted as the q.k product: additive's multiply-add per
    feature and pair is the same count (its tanh is ignored like softmax's exp)."""
    D, M, P, C = cfg["dim"], cfg["mlp_dim"], cfg["patch_size"], cfg["channels"]
    N = (cfg["image_size"] // P) ** 2
    T = N + 1 if cfg.get("pool", "cls") == "cls" else N
    per_block = 2 * T * D * 3 * D + 2 * 2 * T * T * D + 2 * T * D * D + 2 * 2 * T * D * M
    return 2 * N * D * C * P * P + cfg["depth"] * per_block + 2 * D * cfg["num_classes"]


def cmd_bench(args):
    set_threads(args)
    torch.manual_seed(args.seed)
    cfg = cfg_from_args(args)
    model = ViT(cfg)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in random_weights(cfg, args.seed).items()})
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    B = args.batch_size
    x = torch.randn(B, cfg["channels"], cfg["image_size"], cfg["image_size"])
    y = torch.randint(0, cfg["num_classes"], (B,))

    def train_step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    model.train()
    for _ in range(args.warmup):
        train_step()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        train_step()
    train_s = time.perf_counter() - t0

    model.eval()
    with torch.no_grad():
        for _ in range(args.warmup):
            model(x)
        t0 = time.perf_counter()
        for _ in range(args.steps):
            model(x)
        eval_s = time.perf_counter() - t0

    flops = forward_flops(cfg)
    train_ips = args.steps * B / train_s
    eval_ips = args.steps * B / eval_s
    result = {
        "train_img_per_s": train_ips,
        "eval_img_per_s": eval_ips,
        "threads": torch.get_num_threads(),
        "batch_size": B,
        "steps": args.steps,
        "forward_gflop_per_image": flops / 1e9,
        # Backward ~ 2x forward, hence 3x for a training step.
        "train_gflop_per_s": 3 * flops * train_ips / 1e9,
        "eval_gflop_per_s": flops * eval_ips / 1e9,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "torch_version": torch.__version__,
        # Throughput with OpenMP collapses when the cores are shared (spinning barriers),
        # so record how busy the machine was when reading the numbers later.
        "loadavg_1min": os.getloadavg()[0],
        "cpu_count": os.cpu_count(),
        "model": cfg,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


def selftest_forms(args):
    """The form combinations to check: the one given on the command line (unset keys at
    their defaults), or, with none given, the default, each other form alone, and one
    mixture that puts sincos2d without a CLS row under cosine attention."""
    given = {k: getattr(args, k) for k in FORM_CHOICES if getattr(args, k) is not None}
    defaults = {k: choices[0] for k, choices in FORM_CHOICES.items()}
    if given:
        return [dict(defaults, **given)]
    forms = [dict(defaults)]
    for key, choices in FORM_CHOICES.items():
        for word in choices[1:]:
            forms.append(dict(defaults, **{key: word}))
    forms.append(dict(defaults, attention="cosine", pos_embed="sincos2d", pool="mean"))
    return forms


def check_score_variance(cfg, seed):
    """With unit-variance q and k, q.k has variance Dh: the 1/sqrt(Dh) of scaled_dot is
    what brings it back to 1, and dot must not have it."""
    failures = 0
    g = torch.Generator().manual_seed(seed)
    shape = (8, cfg["heads"], 64, cfg["dim"] // cfg["heads"])
    q = torch.randn(shape, generator=g, dtype=torch.float64)
    k = torch.randn(shape, generator=g, dtype=torch.float64)
    dh = shape[-1]
    for form, want in (("dot", float(dh)), ("scaled_dot", 1.0)):
        attn = Attention(cfg["dim"], cfg["heads"], 0.0, 0.0, form).double()
        with torch.no_grad():
            var = attn.scores(q, k).var().item()
        ok = abs(var / want - 1) < 0.1
        print("%s scores of unit-variance q, k: variance %.3f (expected about %g): %s"
              % (form, var, want, "ok" if ok else "FAIL"))
        failures += not ok
    return failures


def direct_sincos(grid, dim, cls_row):
    """The sincos2d formula entry by entry, independent of the vectorised version."""
    quarter = dim // 4
    rows = [[0.0] * dim] if cls_row else []
    for y in range(grid):
        for x in range(grid):
            row = []
            for part in range(4):
                for k in range(quarter):
                    w = 1.0 / 10000.0 ** (k / (quarter - 1))
                    pos = x if part < 2 else y
                    row.append(math.sin(pos * w) if part % 2 == 0 else math.cos(pos * w))
            rows.append(row)
    return np.array(rows)[None]


def sgd_step(model, x, y, lr):
    """One plain SGD step on the parameters that train; returns the loss."""
    model.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p -= lr * p.grad
    return loss.item()


def selftest_one(args, cfg):
    failures = 0
    weights = random_weights(cfg, args.seed)
    meta = model_metadata(cfg)

    # 1. safetensors round trip, and the file's names/shapes match the contract table.
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "w.safetensors")
        write_safetensors(p, weights, meta)
        back, back_meta = read_safetensors(p)
        same = (list(back) == list(weights)
                and all(np.array_equal(back[k], weights[k]) and back[k].dtype == np.float32
                        for k in weights)
                and {k: v for k, v in back_meta.items() if k != "minivit.checksum"} == meta)
        with open(p, "rb") as f:
            hlen = struct.unpack("<Q", f.read(8))[0]
        print("safetensors round trip: %s (header %d bytes, 8-aligned %s)"
              % ("ok" if same else "FAIL", hlen, hlen % 8 == 0))
        failures += not same
        read_cfg = config_from_weights(back, back_meta)
        cfg_ok = all(read_cfg[k] == cfg[k] for k in MODEL_KEYS
                     if k not in ("dropout", "attention_dropout"))
        print("config read back from names, shapes and metadata: %s" % ("ok" if cfg_ok else "FAIL"))
        failures += not cfg_ok
        # A flipped data byte must be caught by the checksum.
        raw = bytearray(open(p, "rb").read())
        raw[-1] ^= 0x01
        open(p, "wb").write(raw)
        try:
            read_safetensors(p)
            print("checksum detects corruption: FAIL")
            failures += 1
        except ValueError:
            print("checksum detects corruption: ok")

    model = build_model(weights, cfg, torch.float64).train()
    exp = expected_shapes(cfg)
    sd = model.state_dict()
    names_ok = (set(sd) == set(exp)
                and all(tuple(sd[n].shape) == exp[n] for n in exp))
    # torch lists a module's own parameters before its submodules', so the per-head
    # tensors come before attn.qkv in state_dict(); the contract puts them after it.
    # Every other tensor must be in timm's order.
    own = (".attn.additive_v", ".attn.logit_scale")
    timm_order = [n for n in sd if not n.endswith(own)] == [n for n in exp if not n.endswith(own)]
    print("state_dict names/shapes match contract: %s; timm's tensors in timm's order: %s"
          % ("ok" if names_ok else "FAIL", "ok" if timm_order else "FAIL"))
    failures += not names_ok
    failures += not timm_order

    if cfg["pos_embed"] == "sincos2d":
        grid = cfg["image_size"] // cfg["patch_size"]
        want = direct_sincos(grid, cfg["dim"], cfg["pool"] == "cls")
        diff = float(np.abs(weights["pos_embed"].astype(np.float64) - want).max())
        ok = diff < 1e-6 and not model.pos_embed.requires_grad
        print("sincos2d pos_embed vs the formula entry by entry: max |diff| %.1e, fixed %s: %s"
              % (diff, not model.pos_embed.requires_grad, "ok" if ok else "FAIL"))
        failures += not ok

    if args.data:
        x, y = load_batch(args.data, args.batch_size, parse_floats(args.mean),
                          parse_floats(args.std), cfg["channels"])
    else:
        g = torch.Generator().manual_seed(args.seed + 1)
        x = torch.randn(args.batch_size, cfg["channels"], cfg["image_size"], cfg["image_size"],
                        generator=g)
        y = torch.randint(0, cfg["num_classes"], (args.batch_size,), generator=g)
    x = x.double()

    # 2. attention rows are distributions and not (nearly) uniform with this init.
    maps, _ = attention_maps(model, x[:1])
    row_err = (maps.sum(-1) - 1).abs().max().item()
    T = maps.shape[-1]
    want_T = (cfg["image_size"] // cfg["patch_size"]) ** 2 + (cfg["pool"] == "cls")
    print("attention shape %s, max |row sum - 1| %.1e, max weight %.3f (uniform %.3f)"
          % (tuple(maps[:, 0].shape), row_err, maps.max().item(), 1.0 / T))
    failures += row_err > 1e-9 or T != want_T

    # 3. gradients: autograd vs central differences on random entries of every tensor.
    def loss_fn():
        return F.cross_entropy(model(x), y)

    model.zero_grad()
    loss = loss_fn()
    loss.backward()
    print("loss (float64) %.10f" % loss.item())
    rng = np.random.default_rng(args.seed)
    eps, worst, checked = 1e-6, 0.0, 0
    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    with torch.no_grad():
        for name, p in trained:
            flat, gflat = p.view(-1), p.grad.view(-1)
            for idx in rng.choice(flat.numel(), size=min(args.entries, flat.numel()), replace=False):
                orig = flat[idx].item()
                flat[idx] = orig + eps
                lp = loss_fn().item()
                flat[idx] = orig - eps
                lm = loss_fn().item()
                flat[idx] = orig
                fd = (lp - lm) / (2 * eps)
                ag = gflat[idx].item()
                # Absolute floor: central differences of a float64 loss carry ~1e-10 of
                # rounding, so relative error is meaningless for near-zero gradients
                # (the key bias, e.g., has an exactly zero gradient under dot-product
                # scores: softmax is shift-invariant).
                err = abs(fd - ag) / max(abs(fd), abs(ag), 1e-4)
                worst = max(worst, err)
                checked += 1
                if err > 1e-5:
                    print("  %s[%d]: autograd %.6e fd %.6e rel %.2e FAIL" % (name, idx, ag, fd, err))
                    failures += 1
    print("finite differences: %d entries over %d tensors, worst rel err %.2e"
          % (checked, len(trained), worst))

    # 4. Swin v2's clamp: a head whose log-temperature is past ln 100 gets no gradient.
    if cfg["attention"] == "cosine":
        with torch.no_grad():
            model.blocks[0].attn.logit_scale[0] = LOGIT_SCALE_MAX + 0.5
        model.zero_grad()
        loss_fn().backward()
        gs = model.blocks[0].attn.logit_scale.grad.view(-1)
        ok = gs[0].item() == 0.0 and bool((gs[1:] != 0).all())
        print("clamped logit_scale passes no gradient (head 0 %.1e, others min |g| %.1e): %s"
              % (gs[0].item(), gs[1:].abs().min().item() if gs.numel() > 1 else 0.0,
                 "ok" if ok else "FAIL"))
        failures += not ok

    # 5. One SGD step moves what trains and leaves a fixed embedding bit for bit alone.
    model = build_model(weights, cfg).train()
    before = {n: t.clone() for n, t in model.state_dict().items()}
    sgd_step(model, x.float(), y, 0.1)
    after = model.state_dict()
    fixed = [n for n, p in model.named_parameters() if not p.requires_grad]
    ok = (all(torch.equal(after[n], before[n]) for n in fixed)
          and all(not torch.equal(after[n], before[n]) for n, p in model.named_parameters()
                  if p.requires_grad))
    print("SGD step moves every trained tensor, leaves fixed ones %s unchanged: %s"
          % (fixed or "(none)", "ok" if ok else "FAIL"))
    failures += not ok
    return failures


def cmd_selftest(args):
    """Checks the script itself, for every model form: safetensors round trip, names, and
    autograd vs finite differences in float64 (so any disagreement is a model bug, not
    rounding)."""
    set_threads(args)
    failures = check_score_variance(cfg_from_args(args, forms=False), args.seed)
    results = []
    for forms in selftest_forms(args):
        cfg = dict(cfg_from_args(args, forms=False), **forms)
        label = "attention=%(attention)s pos_embed=%(pos_embed)s pool=%(pool)s" % cfg
        print("== %s" % label)
        t0 = time.perf_counter()
        n = selftest_one(args, cfg)
        print("-- %s: %s (%.1f s)" % (label, "ok" if n == 0 else "%d FAILED" % n,
                                     time.perf_counter() - t0))
        results.append((label, n))
        failures += n
    for label, n in results:
        print("%-50s %s" % (label, "ok" if n == 0 else "FAIL (%d)" % n))
    print("selftest: %s" % ("PASS" if failures == 0 else "FAIL (%d)" % failures))
    return 0 if failures == 0 else 1


# ----------------------------------------------------------------------------------------

def add_model_args(p, form_defaults=True):
    p.add_argument("--image-size", dest="image_size", type=int, default=28)
    p.add_argument("--channels", type=int, default=1)
    p.add_argument("--patch-size", dest="patch_size", type=int, default=4)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--mlp-dim", dest="mlp_dim", type=int, default=128)
    p.add_argument("--num-classes", dest="num_classes", type=int, default=10)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--attention-dropout", dest="attention_dropout", type=float, default=0.0)
    add_form_args(p, form_defaults)


def add_form_args(p, defaults):
    """--attention, --pos-embed, --pool; without defaults an unset one is None."""
    for key, choices in FORM_CHOICES.items():
        p.add_argument("--" + key.replace("_", "-"), dest=key, choices=choices,
                       default=choices[0] if defaults else None,
                       help="model.%s (default %s)" % (key, choices[0]))


def add_threads(p, default=0):
    p.add_argument("--threads", type=int, default=default,
                   help="torch.set_num_threads (0 = torch default)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("init", help="random weights in the contract's safetensors layout")
    add_model_args(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.set_defaults(fn=cmd_init)

    p = sub.add_parser("step", help="one plain SGD step on the first B training images")
    p.add_argument("--weights", required=True)
    p.add_argument("--data", required=True, help="directory with Fashion-MNIST IDX files")
    p.add_argument("--batch-size", dest="batch_size", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--mean", required=True, help="float or comma-separated per channel")
    p.add_argument("--std", required=True, help="float or comma-separated per channel")
    p.add_argument("--heads", type=int, default=None, help="if not in the weights' metadata")
    p.add_argument("--out", required=True)
    p.add_argument("--grads-out", dest="grads_out", default=None,
                   help="also write the raw gradients (same names)")
    add_threads(p)
    p.set_defaults(fn=cmd_step)

    p = sub.add_parser("compare", help="per-tensor relative error of two weight files")
    p.add_argument("a")
    p.add_argument("b", help="the reference (denominator)")
    p.add_argument("--base", default=None, help="compare updates A-base vs B-base")
    p.add_argument("--rtol", type=float, default=1e-3)
    p.set_defaults(fn=cmd_compare)

    p = sub.add_parser("attention", help="eval-mode attention maps [layers, heads, T, T]")
    p.add_argument("--weights", required=True)
    p.add_argument("--image-npy", dest="image_npy", required=True)
    p.add_argument("--heads", type=int, default=None)
    p.add_argument("--out", required=True)
    add_threads(p)
    p.set_defaults(fn=cmd_attention)

    p = sub.add_parser("bench", help="training/eval throughput (AdamW, random data)")
    add_model_args(p)
    p.add_argument("--batch-size", dest="batch_size", type=int, default=128)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    add_threads(p, default=2)
    p.set_defaults(fn=cmd_bench)

    p = sub.add_parser("selftest", help="round trip + autograd vs finite differences",
                       description="Checks every model form unless --attention, --pos-embed "
                       "or --pool picks one (the others then at their defaults).")
    add_model_args(p, form_defaults=False)
    p.add_argument("--data", default=None, help="IDX directory (default: random inputs)")
    # Two images still catch one image leaking into another, and keep the finite
    # differences of the costliest form (additive holds B*H*T*T*Dh numbers) within seconds.
    p.add_argument("--batch-size", dest="batch_size", type=int, default=2)
    p.add_argument("--mean", default="0.2860")
    p.add_argument("--std", default="0.3530")
    p.add_argument("--entries", type=int, default=2, help="entries checked per tensor")
    p.add_argument("--seed", type=int, default=0)
    # One thread: float64 matmuls are small here and OpenMP contention only slows them.
    add_threads(p, default=1)
    p.set_defaults(fn=cmd_selftest)

    args = ap.parse_args(argv)
    return args.fn(args) or 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError) as e:
        # Bad inputs (missing file, corrupt safetensors, wrong .npy) are user errors:
        # one line, non-zero status, rather than a traceback.
        print("error: %s" % e, file=sys.stderr)
        sys.exit(2)
