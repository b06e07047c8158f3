#include "minivit/model/params.h"

#include <algorithm>
#include <cmath>

#include "minivit/core/rng.h"

namespace minivit {

namespace {
struct Init {
  ParamInit kind;
  double scale = 0.0;
};
}  // namespace

std::vector<ParamSpec> vit_param_specs(const ModelConfig& c) {
  const int64_t D = c.dim, M = c.mlp_dim, K = c.num_classes, T = c.tokens(), H = c.heads;
  // Conv2d's default (Kaiming-uniform with a = sqrt 5) gives bound 1/sqrt(fan_in) for both
  // weight and bias; timm leaves the patch projection at that default.
  const Init patch{ParamInit::uniform, 1.0 / std::sqrt(double(c.patch_len()))};
  const Init weight{ParamInit::trunc_normal, 0.02}, zeros{ParamInit::zeros}, ones{ParamInit::ones};
  const Init fixed_sincos{ParamInit::sincos_2d};
  std::vector<ParamSpec> specs;
  auto add = [&](std::string name, std::vector<int64_t> shape, Init init, bool decay,
                 float* ViTParams::*field) {
    ParamSpec s;
    s.name = std::move(name);
    s.shape = std::move(shape);
    s.size = 1;
    for (int64_t d : s.shape) s.size *= d;
    s.init = init.kind;
    s.init_scale = init.scale;
    s.decay = decay;
    s.model_field = field;
    specs.push_back(std::move(s));
  };
  auto add_block = [&](int l, const char* name, std::vector<int64_t> shape, Init init, bool decay,
                       float* BlockParams::*field) {
    add("blocks." + std::to_string(l) + "." + name, std::move(shape), init, decay, nullptr);
    specs.back().block = l;
    specs.back().block_field = field;
  };
  using B = BlockParams;
  if (c.has_cls_token())
    add("cls_token", {1, 1, D}, {ParamInit::normal, 1e-6}, false, &ViTParams::cls_token);
  if (c.pos_embed == PosEmbedKind::learned) {
    add("pos_embed", {1, T, D}, weight, false, &ViTParams::pos_embed);
  } else if (c.pos_embed == PosEmbedKind::sincos2d) {
    add("pos_embed", {1, T, D}, fixed_sincos, false, &ViTParams::pos_embed);
    specs.back().trainable = false;
    specs.back().sincos_grid = c.grid();
  }
  for (int s = 0; s < c.stem_stages(); ++s) {
    // Conv2d's default as for the projection, over each convolution's own fan-in.
    const Init conv{ParamInit::uniform, 1.0 / std::sqrt(9.0 * c.stem_in(s))};
    const std::string prefix = "patch_embed.stem." + std::to_string(s) + ".";
    add(prefix + "weight", {c.stem_out(s), c.stem_in(s), 3, 3}, conv, true, nullptr);
    specs.back().stage = s;
    specs.back().stage_field = &StemParams::weight;
    add(prefix + "bias", {c.stem_out(s)}, conv, false, nullptr);
    specs.back().stage = s;
    specs.back().stage_field = &StemParams::bias;
  }
  add("patch_embed.proj.weight", {D, c.patch_channels(), c.patch_kernel(), c.patch_kernel()},
      patch, true, &ViTParams::patch_w);
  add("patch_embed.proj.bias", {D}, patch, false, &ViTParams::patch_b);
  for (int l = 0; l < c.depth; ++l) {
    add_block(l, "norm1.weight", {D}, ones, false, &B::norm1_w);
    add_block(l, "norm1.bias", {D}, zeros, false, &B::norm1_b);
    add_block(l, "attn.qkv.weight", {3 * D, D}, weight, true, &B::qkv_w);
    add_block(l, "attn.qkv.bias", {3 * D}, zeros, false, &B::qkv_b);
    // minivit's own score parameters, after timm's qkv as Swin v2 places its logit_scale.
    if (c.attention == AttentionForm::additive)
      add_block(l, "attn.additive_v", {H, D / H}, weight, false, &B::additive_v);
    // The log-temperature: ln 10 for cosine, scaled_dot's 1 / sqrt(Dh) for lsa.
    if (c.attention == AttentionForm::cosine || c.attention == AttentionForm::lsa) {
      const double start =
          c.attention == AttentionForm::cosine ? std::log(10.0) : -0.5 * std::log(double(D / H));
      add_block(l, "attn.logit_scale", {H, 1, 1}, {ParamInit::constant, start}, false,
                &B::logit_scale);
    }
    add_block(l, "attn.proj.weight", {D, D}, weight, true, &B::proj_w);
    add_block(l, "attn.proj.bias", {D}, zeros, false, &B::proj_b);
    add_block(l, "norm2.weight", {D}, ones, false, &B::norm2_w);
    add_block(l, "norm2.bias", {D}, zeros, false, &B::norm2_b);
    add_block(l, "mlp.fc1.weight", {M, D}, weight, true, &B::fc1_w);
    add_block(l, "mlp.fc1.bias", {M}, zeros, false, &B::fc1_b);
    add_block(l, "mlp.fc2.weight", {D, M}, weight, true, &B::fc2_w);
    add_block(l, "mlp.fc2.bias", {D}, zeros, false, &B::fc2_b);
  }
  // timm's `norm` on the CLS token, or `fc_norm` on the mean of the tokens; CCT's `norm` on
  // every token before sequence pooling.
  const std::string head_norm = c.pool == PoolKind::mean ? "fc_norm" : "norm";
  add(head_norm + ".weight", {D}, ones, false, &ViTParams::norm_w);
  add(head_norm + ".bias", {D}, zeros, false, &ViTParams::norm_b);
  // CCT's attention_pool = Linear(D, 1), without the bias the softmax cancels.
  if (c.pool == PoolKind::seq)
    add("attention_pool.weight", {1, D}, weight, true, &ViTParams::pool_w);
  add("head.weight", {K, D}, weight, true, &ViTParams::head_w);
  add("head.bias", {K}, zeros, false, &ViTParams::head_b);
  int64_t offset = 0;
  for (auto& s : specs) {
    s.offset = offset;
    offset += s.size;
  }
  return specs;
}

double vit_param_count(const ModelConfig& c) {
  double total = 0.0;
  for (const ParamSpec& s : vit_param_specs(c)) {
    double size = 1.0;
    for (int64_t d : s.shape) size *= double(d);
    total += size;
  }
  return total;
}

ViTParams bind_params(float* base, const std::vector<ParamSpec>& specs, int depth) {
  ViTParams p;
  p.blocks.resize(size_t(depth));
  for (const ParamSpec& s : specs)
    if (s.stage >= 0) p.stem.resize(std::max(p.stem.size(), size_t(s.stage) + 1));
  for (const ParamSpec& s : specs) {
    if (s.block >= 0)
      p.blocks[size_t(s.block)].*s.block_field = base + s.offset;
    else if (s.stage >= 0)
      p.stem[size_t(s.stage)].*s.stage_field = base + s.offset;
    else
      p.*s.model_field = base + s.offset;
  }
  return p;
}

// Normal(0, std) redrawn outside +-2 std, as timm's trunc_normal_ intends.
static void trunc_normal(float* out, int64_t n, double std, uint64_t key) {
  uint64_t draw = 0;
  for (int64_t i = 0; i < n; ++i) {
    double z;
    do z = rng_normal(key, draw++);
    while (std::fabs(z) > 2.0);
    out[i] = float(z * std);
  }
}

void sincos_2d_table(float* out, int64_t rows, int64_t D, int G) {
  const int64_t quarter = D / 4, patches = int64_t(G) * G, leading = rows - patches;
  std::fill(out, out + leading * D, 0.0f);
  for (int64_t n = 0; n < patches; ++n) {
    const double y = double(n / G), x = double(n % G);
    float* row = out + (leading + n) * D;
    for (int64_t k = 0; k < quarter; ++k) {
      // With D = 4 the one frequency is 1, where the formula's exponent would be 0 / 0.
      const double exponent = quarter > 1 ? double(k) / double(quarter - 1) : 0.0;
      const double omega = 1.0 / std::pow(10000.0, exponent);
      row[k] = float(std::sin(x * omega));
      row[quarter + k] = float(std::cos(x * omega));
      row[2 * quarter + k] = float(std::sin(y * omega));
      row[3 * quarter + k] = float(std::cos(y * omega));
    }
  }
}

void init_params(float* weights, const std::vector<ParamSpec>& specs, uint64_t seed) {
  for (size_t t = 0; t < specs.size(); ++t) {
    const ParamSpec& s = specs[t];
    float* p = weights + s.offset;
    const uint64_t key = rng_key(seed, kRngInit, t);
    switch (s.init) {
      case ParamInit::zeros:
        std::fill(p, p + s.size, 0.0f);
        break;
      case ParamInit::ones:
        std::fill(p, p + s.size, 1.0f);
        break;
      case ParamInit::trunc_normal:
        trunc_normal(p, s.size, s.init_scale, key);
        break;
      case ParamInit::normal:
        for (int64_t i = 0; i < s.size; ++i) p[i] = float(s.init_scale * rng_normal(key, i));
        break;
      case ParamInit::constant: std::fill(p, p + s.size, float(s.init_scale)); break;
      case ParamInit::uniform:
        for (int64_t i = 0; i < s.size; ++i)
          p[i] = float((2.0 * rng_uniform(key, i) - 1.0) * s.init_scale);
        break;
      case ParamInit::sincos_2d:
        sincos_2d_table(p, s.shape[1], s.shape[2], s.sincos_grid);
        break;
    }
  }
}

}  // namespace minivit
