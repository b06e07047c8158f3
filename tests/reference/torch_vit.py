#!/usr/bin/python3
"""Independent PyTorch reference for the minivit Vision Transformer.

This file is its command line. The model (vit_model.py) is written by hand (timm is not
available) but mirrors timm's VisionTransformer(global_pool='token', class_token=True,
qkv_bias=True, no pre-norm, no fc_norm) closely enough that its state_dict names, shapes
and numerics are the ones in docs/model.md. Its purpose is to be an oracle for the C++
code: gradients (via `step` + `compare`), attention maps (`attention`) and speed (`bench`);
`selftest` (vit_selftest.py) checks the reference itself. vit_files.py reads and writes
safetensors and IDX files.

Besides that default it builds every model form minivit offers: attention scores
(scaled_dot, dot, additive, cosine, lsa), position embeddings (learned, sincos2d, none) and
pooling (cls, mean: timm's global_pool='avg', class_token=False; seq: CCT's sequence
pooling). See docs/model.md for the tensor table of each form.

Run with Debian's interpreter: /usr/bin/python3 torch_vit.py SUBCOMMAND --help
"""
import argparse
import json
import os
import resource
import sys
import time
from collections import OrderedDict

import numpy as np
import torch
import torch.nn.functional as F

from vit_files import load_batch, parse_floats, read_safetensors, write_safetensors
from minivit_draws import drop_path_scales, dropout_masks, patch_keep
from vit_model import (FORM_CHOICES, MODEL_KEYS, ViT, attention_maps, build_model, stem_widths,
                       config_from_weights, keep_pool_weights, model_metadata, random_weights,
                       set_bf16_products, state_to_numpy)
from vit_selftest import check_score_variance, selftest_forms, selftest_one


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
    # Dropout 0 in cfg: train mode is then deterministic, but for minivit's draws set below.
    model = build_model(tensors, cfg)
    model.train()
    set_bf16_products(model, args.precision == "bf16")
    x, y = load_batch(args.data, args.batch_size, parse_floats(args.mean),
                      parse_floats(args.std), cfg["channels"])
    if args.drop_path > 0:
        scales = drop_path_scales(args.drop_path, cfg["depth"], args.batch_size, args.seed,
                                  args.step)
        for block, pair in zip(model.blocks, scales):
            block.path_scales = pair
        # Printed so that a check can tell a step that dropped nothing from one that did.
        dropped = sum(int((s == 0).sum()) for pair in scales for s in pair)
        print("drop path: %d of %d image branches dropped" % (dropped, 2 * len(scales) * len(x)))
    if args.patch_drop > 0:
        grid = cfg["image_size"] // cfg["patch_size"]
        model.keep_patches = patch_keep(args.patch_drop, grid * grid, args.batch_size, args.seed,
                                        args.step)
        print("patch dropout: %d of %d patches kept per image"
              % (model.keep_patches.shape[1], grid * grid))
    if args.dropout > 0 or args.attention_dropout > 0:
        masks = dropout_masks(args.dropout, args.attention_dropout, cfg, args.batch_size,
                              args.seed, args.step, args.patch_drop)
        for block, sites in zip(model.blocks, masks):
            modules = {"attention": block.attn.attn_drop, "proj": block.attn.proj_drop,
                       "gelu": block.mlp.drop1, "fc2": block.mlp.drop2}
            for name, mask in sites.items():
                modules[name].mask = mask
        # Per site, so that a check can tell that each one dropped something.
        for name in ("attention", "proj", "gelu", "fc2"):
            if name in masks[0]:
                dropped = sum(int((sites[name] == 0).sum()) for sites in masks)
                total = sum(sites[name].numel() for sites in masks)
                print("dropout %s: %d of %d elements dropped" % (name, dropped, total))
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


def cmd_attention(args):
    set_threads(args)
    tensors, meta = read_safetensors(args.weights)
    cfg = config_from_weights(tensors, meta, args.heads)
    model = build_model(tensors, cfg).eval()
    img = np.load(args.image_npy).astype(np.float32)
    want = (cfg["channels"], cfg["image_size"], cfg["image_size"])
    if img.shape != want:
        raise SystemExit("error: %s has shape %s, expected %s" % (args.image_npy, img.shape, want))
    pool_weights = keep_pool_weights(model)
    maps, logits = attention_maps(model, torch.from_numpy(img)[None])
    out = maps[:, 0].numpy().astype(np.float32)  # [layers, heads, T, T]
    np.save(args.out, out)
    if args.pool_weights_out:
        if pool_weights is None:
            raise SystemExit("error: --pool-weights-out: the model has no sequence pooling")
        np.save(args.pool_weights_out, pool_weights[-1][0].numpy().astype(np.float32))
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
    embed = 2 * N * D * C * P * P
    widths = stem_widths(cfg)
    if widths:  # the stem's convolutions, then a 1x1 projection
        side, c_in, embed = cfg["image_size"], C, 2 * N * D * widths[-1]
        for c_out in widths:
            side = (side + 1) // 2
            embed += 2 * side * side * 9 * c_in * c_out
            c_in = c_out
    return embed + cfg["depth"] * per_block + 2 * D * cfg["num_classes"]


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
    p.add_argument("--stem-channels", dest="stem_channels", type=int, default=32,
                   help="model.stem_channels: the conv stem's first width (patch_embed conv)")
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
    p.add_argument("--drop-path", dest="drop_path", type=float, default=0.0,
                   help="model.drop_path: drop the images minivit's step drops")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="model.dropout: drop the elements minivit's step drops (branch outputs, "
                        "MLP hidden)")
    p.add_argument("--patch-drop", dest="patch_drop", type=float, default=0.0,
                   help="model.patch_drop: keep the patches minivit's step keeps")
    p.add_argument("--attention-dropout", dest="attention_dropout", type=float, default=0.0,
                   help="model.attention_dropout: drop the attention weights minivit's step drops")
    p.add_argument("--seed", type=int, default=0, help="train.seed of that step")
    p.add_argument("--step", type=int, default=0, help="the step's index (0: the first)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="train.precision: bf16 rounds the inputs of the blocks' products")
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
    p.add_argument("--pool-weights-out", dest="pool_weights_out", default=None,
                   help="with sequence pooling, also save its weights over the tokens [T]")
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
