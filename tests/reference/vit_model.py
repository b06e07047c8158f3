"""The reference Vision Transformer: the same module tree as timm's VisionTransformer, so its
state_dict() yields the contract's names, in every model form minivit offers; and the weights,
metadata and config that go with it."""
import math
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MODEL_KEYS = ("image_size", "channels", "patch_size", "dim", "depth", "heads", "mlp_dim",
              "dropout", "attention_dropout", "num_classes", "attention", "pos_embed", "pool",
              "patch_embed", "stem_channels")
# The model forms, by the words minivit's config uses; the first of each is the default,
# which is also what a file without the metadata key means.
FORM_CHOICES = OrderedDict([
    ("attention", ("scaled_dot", "dot", "additive", "cosine", "lsa")),
    ("pos_embed", ("learned", "sincos2d", "none")),
    ("pool", ("cls", "mean", "seq")),
    ("patch_embed", ("linear", "shifted", "conv")),
])
LN_EPS = 1e-6  # timm's ViT uses 1e-6, not torch's default 1e-5
LOGIT_SCALE_MAX = math.log(100.0)  # Swin v2 caps the cosine temperature at 100; lsa too


def with_diagonal_shifts(x, h):
    """x (B, C, S, S) followed along channels by its four diagonal shifts by h pixels: copy
    (dy, dx) holds x(row + dy, column + dx), zero outside the image, for (dy, dx) in
    (-h, -h), (-h, h), (h, -h), (h, h): shifted patch tokenization's input."""
    S = x.shape[-1]
    padded = F.pad(x, (h, h, h, h))
    copies = [x]
    for dy, dx in ((-h, -h), (-h, h), (h, -h), (h, h)):
        copies.append(padded[:, :, h + dy:h + dy + S, h + dx:h + dx + S])
    return torch.cat(copies, dim=1)


def stem_widths(cfg):
    """The conv stem's output channels, stage by stage: log2 patch_size stride-2 convolutions
    from stem_channels, doubling; none unless patch_embed is "conv"."""
    if cfg.get("patch_embed", "linear") != "conv":
        return []
    stages = int(round(math.log2(cfg["patch_size"])))
    return [cfg.get("stem_channels", 32) << s for s in range(stages)]


class PatchEmbed(nn.Module):
    def __init__(self, channels, patch_size, dim, form="linear", stem_channels=32):
        super().__init__()
        self.shift = patch_size // 2 if form == "shifted" else 0
        if form == "conv":
            # Early convolutions (Xiao et al. 2021): 3x3, stride 2, padding 1, each followed
            # by GELU, halving the image down to one position a patch; then a 1x1 projection.
            widths = stem_widths(dict(patch_embed="conv", patch_size=patch_size,
                                      stem_channels=stem_channels))
            self.stem = nn.ModuleList(
                nn.Conv2d(c_in, c_out, 3, stride=2, padding=1)
                for c_in, c_out in zip([channels] + widths[:-1], widths))
            self.proj = nn.Conv2d(widths[-1], dim, 1)
            return
        self.stem = None
        # A stride-P conv is the same as flattening each patch in (channel, row, column)
        # order and applying a linear map, which is how the contract defines it.
        self.proj = nn.Conv2d(channels * (5 if self.shift else 1), dim, patch_size, stride=patch_size)

    def forward(self, x):
        if self.shift:
            x = with_diagonal_shifts(x, self.shift)
        if self.stem is not None:
            for conv in self.stem:
                x = F.gelu(conv(x))
        return self.proj(x).flatten(2).transpose(1, 2)  # (B, N, D), patches row-major


class Dropout(nn.Module):
    """nn.Dropout, unless `mask` is set: then the input times that mask (float32, shaped as
    the input: 0 where an element is dropped, 1 / (1 - p) where it is kept), so that the
    check can drop the elements minivit's step drops (minivit_draws.dropout_masks)."""

    def __init__(self, p):
        super().__init__()
        self.p = p
        self.mask = None

    def forward(self, x):
        if self.mask is not None:
            return x * self.mask
        return F.dropout(x, self.p, self.training)


def round_to_bf16(t):
    """t's values rounded to the nearest bfloat16 (ties to even), in t's dtype."""
    return t.to(torch.bfloat16).to(t.dtype)


class Bf16Products(torch.autograd.Function):
    """x @ weight^T + bias as minivit's train.precision = "bf16" computes it: each product's
    two inputs rounded to bf16 and the sum in the working dtype; in backward the output
    gradient is rounded too for dx = g @ W and dW = g^T @ x, while the bias gradient sums the
    unrounded g."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        x_r, w_r = round_to_bf16(x), round_to_bf16(weight)
        ctx.save_for_backward(x_r, w_r)
        return x_r @ w_r.t() + bias

    @staticmethod
    def backward(ctx, grad):
        x_r, w_r = ctx.saved_tensors
        g_r = round_to_bf16(grad)
        rows = g_r.reshape(-1, g_r.shape[-1])
        return (g_r @ w_r, rows.t() @ x_r.reshape(-1, x_r.shape[-1]),
                grad.reshape(-1, grad.shape[-1]).sum(0))


class Linear(nn.Linear):
    """nn.Linear, whose products take bf16-rounded inputs while bf16_products is set (the
    transformer blocks' layers: set_bf16_products)."""
    bf16_products = False

    def forward(self, x):
        if self.bf16_products:
            return Bf16Products.apply(x, self.weight, self.bias)
        return super().forward(x)


def set_bf16_products(model, on):
    """The blocks' qkv, proj, fc1 and fc2 products in bf16 (minivit's train.precision); the
    patch embedding and the head stay in the working dtype, as in minivit."""
    for block in model.blocks:
        for layer in (block.attn.qkv, block.attn.proj, block.mlp.fc1, block.mlp.fc2):
            layer.bf16_products = on


class Attention(nn.Module):
    def __init__(self, dim, heads, attn_drop, proj_drop, form="scaled_dot"):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.scale = self.head_dim ** -0.5
        self.form = form
        self.qkv = Linear(dim, 3 * dim, bias=True)
        if form == "additive":
            self.additive_v = nn.Parameter(torch.zeros(heads, self.head_dim))
        elif form == "cosine":
            # Swin v2's per-head log-temperature, and its initial value ln 10.
            self.logit_scale = nn.Parameter(torch.full((heads, 1, 1), math.log(10.0)))
        elif form == "lsa":
            # Locality self-attention's learned temperature, from scaled_dot's 1 / sqrt(Dh).
            self.logit_scale = nn.Parameter(torch.full((heads, 1, 1), math.log(self.scale)))
        elif form not in ("scaled_dot", "dot"):
            raise ValueError("unknown attention form %r" % form)
        self.attn_drop = Dropout(attn_drop)
        self.proj = Linear(dim, dim)
        self.proj_drop = Dropout(proj_drop)
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
        if self.form == "lsa":
            # Lee et al.'s locality self-attention: a learned temperature, and each token's
            # score against itself masked with the lowest float, as their code masks it.
            temperature = torch.clamp(self.logit_scale, max=LOGIT_SCALE_MAX).exp()
            dots = (q @ k.transpose(-2, -1)) * temperature
            own = torch.eye(dots.shape[-1], dtype=torch.bool, device=dots.device)
            return dots.masked_fill(own, -torch.finfo(dots.dtype).max)
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
        self.fc1 = Linear(dim, hidden)
        self.act = nn.GELU()  # approximate='none': the exact erf form, as in timm
        self.drop1 = Dropout(drop)
        self.fc2 = Linear(hidden, dim)
        self.drop2 = Dropout(drop)

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

        # Stochastic depth (timm's DropPath): the per-image factors that scale the attention
        # and MLP branches, [B] each (0 for a dropped image, 1/(1-p) for a kept one), set
        # from outside for one forward (minivit_draws.drop_path_scales) so that both sides
        # drop the same images; None is the model without it.
        self.path_scales = None

    def forward(self, x):
        scales = self.path_scales
        branch = self.attn(self.norm1(x))
        x = x + (branch if scales is None else branch * scales[0].view(-1, 1, 1))
        branch = self.mlp(self.norm2(x))
        return x + (branch if scales is None else branch * scales[1].view(-1, 1, 1))


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
        self.patch_embed = PatchEmbed(cfg["channels"], cfg["patch_size"], D,
                                      cfg.get("patch_embed", "linear"),
                                      cfg.get("stem_channels", 32))
        self.blocks = nn.ModuleList(
            Block(D, cfg["heads"], cfg["mlp_dim"], cfg.get("dropout", 0.0),
                  cfg.get("attention_dropout", 0.0), cfg.get("attention", "scaled_dot"))
            for _ in range(cfg["depth"]))
        # timm: the final norm before token pooling, or fc_norm after average pooling; CCT:
        # the final norm on every token, then sequence pooling by attention_pool's scores.
        if self.pool == "mean":
            self.fc_norm = nn.LayerNorm(D, eps=LN_EPS)
        else:
            self.norm = nn.LayerNorm(D, eps=LN_EPS)
        if self.pool == "seq":
            self.attention_pool = nn.Linear(D, 1, bias=False)  # the softmax cancels a bias
        self.head = nn.Linear(D, cfg["num_classes"])
        # Patch dropout (timm's PatchDropout): the patch indices each image keeps, [B, kept]
        # int64, set from outside for one forward (minivit_draws.patch_keep) so that both
        # sides keep the same patches; None keeps every one.
        self.keep_patches = None

    def forward(self, x):
        x = self.patch_embed(x)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        if self.pos_embed is not None:
            x = x + self.pos_embed
        # No dropout here: timm's pos_drop_rate is its own argument, 0 by default, and
        # model.dropout is its proj_drop_rate (the branches' outputs and the MLP's hidden).
        if self.keep_patches is not None:
            # The CLS token stays first; the kept patches follow in the order given.
            prefix = 0 if self.cls_token is None else 1
            index = self.keep_patches.unsqueeze(-1).expand(-1, -1, x.shape[-1])
            x = torch.cat([x[:, :prefix], torch.gather(x[:, prefix:], 1, index)], dim=1)
        for blk in self.blocks:
            x = blk(x)
        if self.pool == "cls":
            return self.head(self.norm(x)[:, 0])
        if self.pool == "seq":
            x = self.norm(x)
            weights = F.softmax(self.attention_pool(x), dim=1)  # [B, T, 1]
            return self.head((weights * x).sum(dim=1))
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
    shifted = cfg.get("patch_embed", "linear") == "shifted"
    widths = stem_widths(cfg)
    for i, c_out in enumerate(widths):
        s["patch_embed.stem.%d.weight" % i] = (c_out, widths[i - 1] if i else C, 3, 3)
        s["patch_embed.stem.%d.bias" % i] = (c_out,)
    if widths:
        s["patch_embed.proj.weight"] = (D, widths[-1], 1, 1)
    else:
        s["patch_embed.proj.weight"] = (D, 5 * C if shifted else C, P, P)
    s["patch_embed.proj.bias"] = (D,)
    for i in range(cfg["depth"]):
        b = "blocks.%d." % i
        s[b + "norm1.weight"] = (D,)
        s[b + "norm1.bias"] = (D,)
        s[b + "attn.qkv.weight"] = (3 * D, D)
        s[b + "attn.qkv.bias"] = (3 * D,)
        if attention == "additive":
            s[b + "attn.additive_v"] = (H, D // H)
        elif attention in ("cosine", "lsa"):
            s[b + "attn.logit_scale"] = (H, 1, 1)
        s[b + "attn.proj.weight"] = (D, D)
        s[b + "attn.proj.bias"] = (D,)
        s[b + "norm2.weight"] = (D,)
        s[b + "norm2.bias"] = (D,)
        s[b + "mlp.fc1.weight"] = (M, D)
        s[b + "mlp.fc1.bias"] = (M,)
        s[b + "mlp.fc2.weight"] = (D, M)
        s[b + "mlp.fc2.bias"] = (D,)
    final = "fc_norm" if cfg.get("pool", "cls") == "mean" else "norm"
    s[final + ".weight"] = (D,)
    s[final + ".bias"] = (D,)
    if cfg.get("pool", "cls") == "seq":
        s["attention_pool.weight"] = (1, D)
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
    ln 10 (cosine) or ln Dh^-0.5 (lsa) +- 0.2 per head, so a kernel that mixes up heads'
    temperatures is caught. A
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
            # about each form's initial temperature: 10 for cosine, 1 / sqrt(Dh) for lsa
            centre = (math.log(10.0) if cfg.get("attention") == "cosine"
                      else -0.5 * math.log(cfg["dim"] // cfg["heads"]))
            t = centre + 0.2 * torch.randn(shape, generator=g)
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
    if forms["patch_embed"] == "shifted":
        C //= 5  # the image's channels, then four shifted copies of them
    stem_channels = 32  # minivit's default, which a model without a stem carries unused
    if forms["patch_embed"] == "conv":
        # Each stride-2 convolution halves the image: 2^stages pixels a patch side.
        stages = 0
        while ("patch_embed.stem.%d.weight" % stages) in tensors:
            stages += 1
        if stages == 0:
            raise SystemExit("error: patch_embed \"conv\" but no patch_embed.stem.0.weight")
        stem_channels, C = tensors["patch_embed.stem.0.weight"].shape[:2]
        P = 2 ** stages
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
               dropout=0.0, attention_dropout=0.0, stem_channels=int(stem_channels), **forms)
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


def keep_pool_weights(model):
    """With sequence pooling, a list that each forward then appends its pooling weights to
    ([B, T], the softmax of attention_pool's scores over the tokens); None for other pools."""
    if getattr(model, "pool", None) != "seq":
        return None
    kept = []
    model.attention_pool.register_forward_hook(
        lambda module, inputs, scores: kept.append(F.softmax(scores, dim=1)[..., 0]))
    return kept


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
