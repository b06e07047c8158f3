"""The reference's checks of itself (`torch_vit.py selftest`): safetensors round trip, the
contract's names, and autograd against central finite differences in float64, per model form."""
import math
import os
import struct
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

from vit_files import load_batch, parse_floats, read_safetensors, write_safetensors
from vit_model import (FORM_CHOICES, LOGIT_SCALE_MAX, MODEL_KEYS, Attention, attention_maps,
                       build_model, config_from_weights, expected_shapes, model_metadata,
                       random_weights)


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
                # Absolute floor: central differences of a float64 loss near 3 carry
                # rounding of a few ulps (4.4e-16 each) over 2 eps, up to ~1e-9 (seen:
                # 1.1e-9 on a Xeon of family 6 model 207), so relative error is
                # meaningless for near-zero gradients (the key bias, e.g., has an exactly
                # zero gradient under dot-product scores: softmax is shift-invariant).
                err = abs(fd - ag) / max(abs(fd), abs(ag), 1e-3)
                worst = max(worst, err)
                checked += 1
                if err > 1e-5:
                    print("  %s[%d]: autograd %.6e fd %.6e rel %.2e FAIL" % (name, idx, ag, fd, err))
                    failures += 1
    print("finite differences: %d entries over %d tensors, worst rel err %.2e"
          % (checked, len(trained), worst))

    # 4. Swin v2's clamp: a head whose log-temperature is past ln 100 gets no gradient.
    if cfg["attention"] in ("cosine", "lsa"):
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
