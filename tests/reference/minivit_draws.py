"""Which elements and images minivit's training step drops.

minivit's dropout masks and drop-path decisions are counter-based random numbers
(splitmix64; include/minivit/core/rng.h): each is a pure function of (train.seed, step,
block, site, index). They are rebuilt here only to know what minivit dropped in a step:
which ones is an input of the check, like the weights and the batch, not the arithmetic
under test. torch_vit.py `step` hands the result to the model (vit_model.py), which then
drops the same elements and images.
"""
import numpy as np
import torch

RNG_DROPOUT = 3  # kRngDropout
# The sites of a block's draws (DropoutSite in src/model/vit.cpp): one stream each.
SITE_ATTENTION, SITE_PROJ, SITE_GELU, SITE_FC2 = 0, 1, 2, 3
DROP_PATH_SITES = (4, 5)  # the attention branch's and the MLP branch's draws in a block
SITE_PATCH_DROP = 6  # the patches each image keeps, drawn under block 0's key


def _mix64(x):
    """splitmix64's step over uint64 scalars or arrays (products wrap modulo 2^64, as C's
    do)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def rng_key(seed, purpose, a=0, b=0):
    u = np.uint64
    return int(_mix64(_mix64(_mix64(u(seed) ^ _mix64(u(purpose))) ^ u(a)) ^ u(b)))


def uniform_draws(key, n):
    """minivit's rng_uniform(key, i) for i < n: float32 in [0, 1) with 24 random bits."""
    r = _mix64(np.uint64(key) ^ _mix64(np.arange(n, dtype=np.uint64)))
    return (r >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)


def _kept_scale(draws, p):
    """0 where a draw is below the rate p (dropped), 1 / (1 - p) in float32 elsewhere."""
    p = np.float32(p)
    return np.where(draws >= p, np.float32(1.0) / (np.float32(1.0) - p), np.float32(0.0)) \
        .astype(np.float32)


def drop_path_scales(rate, depth, batch, seed, step):
    """The factors minivit's training step `step` of seed `seed` applies with drop path
    `rate`: per block, ([B], [B]) float32 tensors for the attention and MLP branches.
    Block l's rate is rate * l / (depth - 1) (timm's linear rule); an image is kept when its
    uniform draw (24 bits) is at least that rate, and then scaled by 1 / (1 - rate)."""
    step_key = rng_key(seed, RNG_DROPOUT, step)
    out = []
    for block in range(depth):
        p = np.float32(float(np.float32(rate)) * block / (depth - 1)) if depth > 1 else \
            np.float32(0.0)
        out.append(tuple(torch.from_numpy(_kept_scale(
            uniform_draws(rng_key(step_key, block, site), batch), p)) for site in DROP_PATH_SITES))
    return out


def kept_patches(rate, patches):
    """timm's PatchDropout num_keep, as minivit computes it: max(1, int(N (1 - rate))) in
    double precision from the float32 rate; all N at rate 0."""
    if rate <= 0:
        return patches
    return max(1, int(patches * (1.0 - float(np.float32(rate)))))


def patch_keep(rate, patches, batch, seed, step):
    """The patches minivit's training step `step` of seed `seed` keeps with model.patch_drop
    `rate`: a [B, kept] int64 tensor of patch indices, ascending (grid order). Patch i of
    image b draws rng_uniform(key, b * N + i); an image keeps its `kept` smallest draws, the
    lower index first between equal ones."""
    kept = kept_patches(rate, patches)
    key = rng_key(rng_key(seed, RNG_DROPOUT, step), 0, SITE_PATCH_DROP)
    draws = uniform_draws(key, batch * patches).reshape(batch, patches)
    index = np.arange(patches)
    rows = [np.sort(np.lexsort((index, row))[:kept]) for row in draws]
    return torch.from_numpy(np.stack(rows).astype(np.int64))


def dropout_masks(rate, attention_rate, cfg, batch, seed, step, patch_drop=0.0):
    """The dropout masks minivit's training step `step` of seed `seed` applies with
    model.dropout `rate` and model.attention_dropout `attention_rate`: per block a dict from
    site to a float32 tensor, 0 where an element is dropped and 1 / (1 - rate) where it is
    kept, shaped as the tensor it multiplies:
      "attention" [B, H, T, T]  the softmax weights (timm's attn_drop)
      "proj"      [B, T, D]     the attention branch's output (proj_drop)
      "gelu"      [B, T, M]     the MLP's hidden activations (drop1)
      "fc2"       [B, T, D]     the MLP branch's output (drop2)
    A site whose rate is 0 is left out. Element i of a site (its index in the whole batch's
    row-major tensor) is kept when rng_uniform(key of block and site, i) >= its rate. With
    model.patch_drop the blocks' T counts the kept patches."""
    cls_token = 1 if cfg.get("pool", "cls") == "cls" else 0
    T = kept_patches(patch_drop, (cfg["image_size"] // cfg["patch_size"]) ** 2) + cls_token
    D, M, H = cfg["dim"], cfg["mlp_dim"], cfg["heads"]
    shapes = {}
    if attention_rate > 0:
        shapes["attention"] = (SITE_ATTENTION, attention_rate, (batch, H, T, T))
    if rate > 0:
        shapes.update(proj=(SITE_PROJ, rate, (batch, T, D)), gelu=(SITE_GELU, rate, (batch, T, M)),
                      fc2=(SITE_FC2, rate, (batch, T, D)))
    step_key = rng_key(seed, RNG_DROPOUT, step)
    out = []
    for block in range(cfg["depth"]):
        masks = {}
        for name, (site, p, shape) in shapes.items():
            draws = uniform_draws(rng_key(step_key, block, site), int(np.prod(shape)))
            masks[name] = torch.from_numpy(_kept_scale(draws, p).reshape(shape))
        out.append(masks)
    return out
