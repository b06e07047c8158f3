#!/usr/bin/env python3
"""Class-specific gradient rollout with PyTorch's autograd, on the reference model of
vit_model.py: the independent computation minivit's grad_rollout.npy is checked against.

For class c with logit y_c, per layer: W = mean over heads of max(0, A * dy_c/dA), A the
softmax attention (eval mode); add the identity, renormalise rows, multiply the layers from
the first to the last; read the CLS row over the patches, or without a CLS token the mean
of all rows (mean pooling) or the rows weighted by the pooling weights (sequence pooling).

Usage: torch_grad_rollout.py --weights W.safetensors --image-npy input.npy [--class K]
                             --out grad_rollout.npy
Prints the class it explained."""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vit_files import read_safetensors  # noqa: E402
from vit_model import build_model, config_from_weights, keep_pool_weights  # noqa: E402


def keep_attention_with_grad(model):
    """Wraps each block's softmax so the attention tensor stays in the graph with its
    gradient kept: attention is recomputed exactly as Attention.forward does."""
    kept = []
    for blk in model.blocks:
        attn = blk.attn

        def forward(x, attn=attn):
            B, T, D = x.shape
            qkv = attn.qkv(x).reshape(B, T, 3, attn.heads, attn.head_dim).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            a = attn.scores(q, k).softmax(dim=-1)
            a.retain_grad()
            kept.append(a)
            out = (attn.attn_drop(a) @ v).transpose(1, 2).reshape(B, T, D)
            return attn.proj_drop(attn.proj(out))

        attn.forward = forward
    return kept


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--image-npy", dest="image_npy", required=True)
    ap.add_argument("--class", dest="cls", type=int, default=-1)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    tensors, meta = read_safetensors(args.weights)
    cfg = config_from_weights(tensors, meta)
    model = build_model(tensors, cfg, dtype=torch.float64).eval()
    kept = keep_attention_with_grad(model)
    pool_weights = keep_pool_weights(model)
    img = torch.from_numpy(np.load(args.image_npy).astype(np.float64))[None]
    logits = model(img)[0]
    c = int(logits.argmax()) if args.cls < 0 else args.cls
    logits[c].backward()
    cls_pool = hasattr(model, "cls_token") and model.cls_token is not None
    T = kept[0].shape[-1]
    joint = torch.eye(T, dtype=torch.float64)
    for a in kept:
        w = (a[0] * a.grad[0]).clamp(min=0).mean(0)
        w = w + torch.eye(T, dtype=torch.float64)
        w = w / w.sum(-1, keepdim=True)
        joint = w @ joint
    first = 1 if cls_pool else 0
    if pool_weights is not None:
        pooled = pool_weights[-1][0].detach() @ joint
    else:
        pooled = joint[0] if cls_pool else joint.mean(0)
    G = int(round((T - first) ** 0.5))
    out = pooled[first:].reshape(G, G).detach().numpy()
    np.save(args.out, out)
    print("class %d" % c)


if __name__ == "__main__":
    main()
