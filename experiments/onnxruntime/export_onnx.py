#!/usr/bin/python3
"""A trained minivit checkpoint as an ONNX model, through the PyTorch reference's model
(tests/reference/vit_model.py), and the Fashion-MNIST test split as the raw float32 file the
ONNX Runtime scripts read.

usage: /usr/bin/python3 experiments/onnxruntime/export_onnx.py CHECKPOINT CONFIG OUT_DIR
       [--probe N] [--opset K]

Writes into OUT_DIR:
  model.onnx        the checkpoint's model, eval mode, batch axis dynamic
  floor.onnx        a model that only reshapes its input to [batch, num_classes]: what one
                    call through the binding costs with (almost) nothing to compute
  test_images.f32   the test split normalised as (p / 255 - mean) / std with CONFIG's
                    data.mean and data.std, little-endian float32, [N, C, H, W]
  test_labels.u8    its labels, one byte each
  manifest.json     shapes, file names, and torch's logits of the first N (--probe) images
"""
import argparse
import json
import math
import os
import sys
import tomllib

# The reference lives in the test tree: read it, never leave bytecode caches in it.
sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from vit_files import find_idx, read_idx, read_safetensors  # noqa: E402
from vit_model import build_model, config_from_weights  # noqa: E402

# The [model] keys that fix the shapes and the arithmetic: bench times the config's model,
# so the config has to describe the checkpoint's or the two timings measure different things.
SHAPE_KEYS = ("image_size", "channels", "patch_size", "dim", "depth", "heads", "mlp_dim",
              "num_classes", "attention", "pos_embed", "pool", "patch_embed")


def fail(message):
    print("error: %s" % message, file=sys.stderr)
    sys.exit(2)


def floats(value):
    return [float(v) for v in (value if isinstance(value, list) else [value])]


def metadata_floats(metadata, key):
    text = metadata.get(key)
    return None if text is None else floats(json.loads(text))


def check_config(config_path, config, cfg, metadata):
    model = config.get("model", {})
    for key in SHAPE_KEYS:
        if key in model and model[key] != cfg[key]:
            fail("%s: model.%s = %r, but the checkpoint's model has %r (give the config the "
                 "checkpoint was trained with)" % (config_path, key, model[key], cfg[key]))
    if cfg["patch_embed"] == "conv" and model.get("stem_channels", 32) != cfg["stem_channels"]:
        fail("%s: model.stem_channels = %r, but the checkpoint's model has %r"
             % (config_path, model.get("stem_channels", 32), cfg["stem_channels"]))
    data = config.get("data", {})
    if data.get("format", "idx") != "idx":
        fail("%s: data.format = %r, expected \"idx\" (Fashion-MNIST's IDX files)"
             % (config_path, data.get("format")))
    for key in ("mean", "std"):
        if key not in data:
            fail("%s: no data.%s" % (config_path, key))
        # minivit eval normalises with the checkpoint's copy; both sides must see one input.
        stored = metadata_floats(metadata, "minivit.data." + key)
        if stored is not None and not np.allclose(floats(data[key]), stored, rtol=0, atol=1e-6):
            fail("%s: data.%s = %s, but the checkpoint was trained with %s"
                 % (config_path, key, floats(data[key]), stored))


def test_split(directory, channels, image_size, mean, std):
    images = read_idx(find_idx(directory, "t10k-images-idx3-ubyte"))
    labels = read_idx(find_idx(directory, "t10k-labels-idx1-ubyte"))
    if images.ndim == 3:
        images = images[:, None]
    want = (channels, image_size, image_size)
    if tuple(images.shape[1:]) != want or len(labels) != len(images):
        fail("%s: test images %s with %d labels, expected [N, %d, %d, %d] with N labels"
             % (directory, images.shape, len(labels), *want))
    per_channel = lambda v: np.asarray(v * (channels if len(v) == 1 else 1),  # noqa: E731
                                       np.float32).reshape(1, -1, 1, 1)
    x = (images.astype(np.float32) / 255.0 - per_channel(mean)) / per_channel(std)
    return np.ascontiguousarray(x, dtype="<f4"), labels.astype(np.uint8)


class Floor(torch.nn.Module):
    """As cheap as a model with the real one's input and output can be."""

    def __init__(self, num_classes):
        super().__init__()
        self.num_classes = num_classes

    def forward(self, x):
        return x.flatten(1)[:, :self.num_classes]


def export(model, path, example, opset):
    torch.onnx.export(model, example, path, input_names=["images"], output_names=["logits"],
                      dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}},
                      opset_version=opset, do_constant_folding=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("config")
    ap.add_argument("out_dir")
    ap.add_argument("--probe", type=int, default=8,
                    help="test images whose torch logits the manifest keeps (default 8)")
    # 17 is the newest torch 1.13 writes; it has LayerNormalization as one operator.
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--data", default=None,
                    help="Fashion-MNIST IDX directory (default: the config's data.path)")
    args = ap.parse_args()

    torch.set_num_threads(1)
    try:
        tensors, metadata = read_safetensors(args.checkpoint)
    except (ValueError, UnicodeDecodeError) as e:
        fail("%s: expected a minivit checkpoint (safetensors): %s" % (args.checkpoint, e))
    if "patch_embed.proj.weight" not in tensors:
        fail("%s: no patch_embed.proj.weight: expected a minivit checkpoint" % args.checkpoint)
    cfg = config_from_weights(tensors, metadata)
    with open(args.config, "rb") as f:
        try:
            config = tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            fail("%s: not TOML: %s" % (args.config, e))
    check_config(args.config, config, cfg, metadata)
    data_dir = args.data or config.get("data", {}).get("path")
    if not data_dir:
        fail("%s: no data.path, and no --data" % args.config)

    model = build_model(tensors, cfg).eval()
    os.makedirs(args.out_dir, exist_ok=True)
    C, S, K = cfg["channels"], cfg["image_size"], cfg["num_classes"]
    example = torch.zeros(2, C, S, S)
    with torch.no_grad():
        export(model, os.path.join(args.out_dir, "model.onnx"), example, args.opset)
        export(Floor(K).eval(), os.path.join(args.out_dir, "floor.onnx"), example, args.opset)

    x, y = test_split(data_dir, C, S, floats(config["data"]["mean"]),
                      floats(config["data"]["std"]))
    x.tofile(os.path.join(args.out_dir, "test_images.f32"))
    y.tofile(os.path.join(args.out_dir, "test_labels.u8"))
    probe = min(args.probe, len(x))
    with torch.no_grad():
        logits = model(torch.from_numpy(x[:probe])).numpy()
    manifest = dict(
        checkpoint=args.checkpoint, config=args.config, data=data_dir, opset=args.opset,
        torch=torch.__version__, model="model.onnx", floor="floor.onnx",
        images="test_images.f32", labels="test_labels.u8", count=int(len(x)),
        shape=[C, S, S], num_classes=K, batch_size=int(config.get("train", {}).get(
            "batch_size", 128)),
        params=int(sum(v.size for v in tensors.values())),
        form={k: cfg[k] for k in SHAPE_KEYS},
        probe_logits=[[float(v) for v in row] for row in logits])
    with open(os.path.join(args.out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print("exported %s (%d parameters, %s pooling, %d blocks) to %s, opset %d; %d test images"
          % (args.checkpoint, manifest["params"], cfg["pool"], cfg["depth"],
             os.path.join(args.out_dir, "model.onnx"), args.opset, len(x)))
    if not all(math.isfinite(v) for row in manifest["probe_logits"] for v in row):
        fail("torch's logits of the first %d test images are not finite" % probe)


if __name__ == "__main__":
    try:
        main()
    except (OSError, ValueError) as e:
        fail(str(e))
