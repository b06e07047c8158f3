#include "minivit/model/vit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include <unistd.h>

#include "minivit/core/error.h"
#include "minivit/core/rng.h"
#include "minivit/nn/attention.h"
#include "minivit/nn/dropout.h"
#include "minivit/nn/gelu.h"
#include "minivit/nn/layernorm.h"
#include "minivit/nn/linear.h"
#include "minivit/nn/patch_embed.h"

namespace minivit {

std::vector<ParamSpec> vit_param_specs(const ModelConfig& c) {
  const int64_t D = c.dim, M = c.mlp_dim, K = c.num_classes, T = c.tokens();
  std::vector<ParamSpec> specs;
  auto add = [&](std::string name, std::vector<int64_t> shape, bool decay) {
    ParamSpec s;
    s.name = std::move(name);
    s.shape = std::move(shape);
    s.size = 1;
    for (int64_t d : s.shape) s.size *= d;
    s.decay = decay;
    specs.push_back(std::move(s));
  };
  // Order of timm's VisionTransformer.state_dict().
  add("cls_token", {1, 1, D}, false);
  add("pos_embed", {1, T, D}, false);
  add("patch_embed.proj.weight", {D, c.channels, c.patch_size, c.patch_size}, true);
  add("patch_embed.proj.bias", {D}, false);
  for (int l = 0; l < c.depth; ++l) {
    const std::string p = "blocks." + std::to_string(l) + ".";
    add(p + "norm1.weight", {D}, false);
    add(p + "norm1.bias", {D}, false);
    add(p + "attn.qkv.weight", {3 * D, D}, true);
    add(p + "attn.qkv.bias", {3 * D}, false);
    add(p + "attn.proj.weight", {D, D}, true);
    add(p + "attn.proj.bias", {D}, false);
    add(p + "norm2.weight", {D}, false);
    add(p + "norm2.bias", {D}, false);
    add(p + "mlp.fc1.weight", {M, D}, true);
    add(p + "mlp.fc1.bias", {M}, false);
    add(p + "mlp.fc2.weight", {D, M}, true);
    add(p + "mlp.fc2.bias", {D}, false);
  }
  add("norm.weight", {D}, false);
  add("norm.bias", {D}, false);
  add("head.weight", {K, D}, true);
  add("head.bias", {K}, false);
  int64_t offset = 0;
  for (auto& s : specs) {
    s.offset = offset;
    offset += s.size;
  }
  return specs;
}

static ViTParams bind_params(float* base, const std::vector<ParamSpec>& specs, int depth) {
  // Specs are in a fixed order (see vit_param_specs), so binding walks the table once.
  size_t i = 0;
  auto next = [&]() { return base + specs[i++].offset; };
  ViTParams p;
  p.cls_token = next();
  p.pos_embed = next();
  p.patch_w = next();
  p.patch_b = next();
  p.blocks.resize(size_t(depth));
  for (auto& b : p.blocks) {
    b.norm1_w = next();
    b.norm1_b = next();
    b.qkv_w = next();
    b.qkv_b = next();
    b.proj_w = next();
    b.proj_b = next();
    b.norm2_w = next();
    b.norm2_b = next();
    b.fc1_w = next();
    b.fc1_b = next();
    b.fc2_w = next();
    b.fc2_b = next();
  }
  p.norm_w = next();
  p.norm_b = next();
  p.head_w = next();
  p.head_b = next();
  return p;
}

double vit_param_count(const ModelConfig& c) {
  const double T = c.tokens(), D = c.dim, M = c.mlp_dim, L = c.depth, K = c.num_classes,
               PL = double(c.channels) * c.patch_size * c.patch_size;
  // The tensors of vit_param_specs, in its order.
  return D + T * D + PL * D + D + L * (3 * D * D + D * D + 2 * M * D + 9 * D + M) + 2 * D +
         K * D + K;
}

double vit_memory_bytes(const ModelConfig& c, int batch, bool training) {
  const double T = c.tokens(), D = c.dim, M = c.mlp_dim, H = c.heads, L = c.depth,
               K = c.num_classes, PL = double(c.channels) * c.patch_size * c.patch_size;
  const double params = vit_param_count(c);
  // Per image: the residual streams, per block LayerNorm outputs, qkv, attention weights,
  // head outputs and the MLP's two (T, M) buffers, then backward's scratch of the widest.
  const double per_image = (L + 1) * T * D + L * (7 * T * D + 2 * T * M + H * T * T) +
                           (training ? 8 * T * std::max({3 * D, M, H * T}) : 0.0) + T * PL + 4 * K;
  return 4.0 * (params * (training ? 4 : 2) + double(batch) * per_image);
}

void check_vit_fits_memory(const ModelConfig& c, int batch, bool training) {
  const double needed = vit_memory_bytes(c, batch, training);
  const double available = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE));
  if (available > 0 && needed > available)
    throw Error("model: image_size " + std::to_string(c.image_size) + ", patch_size " +
                std::to_string(c.patch_size) + ", dim " + std::to_string(c.dim) + ", depth " +
                std::to_string(c.depth) + ", heads " + std::to_string(c.heads) + ", mlp_dim " +
                std::to_string(c.mlp_dim) + ", num_classes " + std::to_string(c.num_classes) +
                (batch > 0 ? " with batch " + std::to_string(batch) : std::string()) + " needs " +
                std::to_string(int64_t(needed / (1 << 30))) + " GiB, more than this machine's " +
                std::to_string(int64_t(available / (1 << 30))) + " GiB of memory");
}

ViT::ViT(const ModelConfig& c) : config(c), specs((check_vit_fits_memory(c, 0, false), vit_param_specs(c))) {
  num_params = specs.back().offset + specs.back().size;
  weights = Tensor1::from_shape({size_t(num_params)});
  grads = Tensor1::from_shape({size_t(num_params)});
  weights.fill(0.0f);
  grads.fill(0.0f);
  w = bind_params(weights.data(), specs, c.depth);
  g = bind_params(grads.data(), specs, c.depth);
}

const ParamSpec* ViT::find(const std::string& name) const {
  for (const auto& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}

void ViT::zero_grad() { std::fill(grads.begin(), grads.end(), 0.0f); }

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

void ViT::init(uint64_t seed) {
  for (size_t t = 0; t < specs.size(); ++t) {
    const ParamSpec& s = specs[t];
    float* p = weights.data() + s.offset;
    const uint64_t key = rng_key(seed, kRngInit, t);
    const std::string& n = s.name;
    auto ends_with = [&](const char* suffix) {
      const size_t len = std::strlen(suffix);
      return n.size() >= len && n.compare(n.size() - len, len, suffix) == 0;
    };
    if (n == "cls_token") {
      for (int64_t i = 0; i < s.size; ++i) p[i] = float(1e-6 * rng_normal(key, i));
    } else if (n == "pos_embed") {
      trunc_normal(p, s.size, 0.02, key);
    } else if (n.rfind("patch_embed.", 0) == 0) {
      // Conv2d's default (Kaiming-uniform with a = sqrt 5) gives bound 1/sqrt(fan_in) for
      // both weight and bias; timm leaves the patch projection at that default.
      const double bound = 1.0 / std::sqrt(double(config.patch_len()));
      for (int64_t i = 0; i < s.size; ++i) p[i] = float((2.0 * rng_uniform(key, i) - 1.0) * bound);
    } else if (n.find("norm") != std::string::npos) {
      std::fill(p, p + s.size, ends_with(".weight") ? 1.0f : 0.0f);
    } else if (ends_with(".weight")) {
      trunc_normal(p, s.size, 0.02, key);
    } else {
      std::fill(p, p + s.size, 0.0f);
    }
  }
}

Activations::Activations(const ModelConfig& c, int B, bool for_training) : max_batch(B) {
  check_vit_fits_memory(c, B, for_training);
  const size_t b = size_t(B), T = size_t(c.tokens()), N = size_t(c.patches()),
               D = size_t(c.dim), M = size_t(c.mlp_dim), H = size_t(c.heads),
               K = size_t(c.num_classes), PL = size_t(c.patch_len());
  const bool drop = for_training && c.dropout > 0.0f;
  const bool att_drop = for_training && c.attention_dropout > 0.0f;
  patches = Tensor3::from_shape({b, N, PL});
  patch_proj = Tensor3::from_shape({b, N, D});
  resid.resize(size_t(c.depth) + 1);
  for (auto& r : resid) r = Tensor3::from_shape({b, T, D});
  blocks.resize(size_t(c.depth));
  for (auto& a : blocks) {
    a.ln1 = Tensor3::from_shape({b, T, D});
    a.ln1_mean = Tensor2::from_shape({b, T});
    a.ln1_rstd = Tensor2::from_shape({b, T});
    a.qkv = Tensor3::from_shape({b, T, 3 * D});
    a.att = Tensor4::from_shape({b, H, T, T});
    if (att_drop) a.att_mask = Mask1::from_shape({b * H * T * T});
    a.att_out = Tensor3::from_shape({b, T, D});
    if (drop) a.proj_mask = Mask1::from_shape({b * T * D});
    a.resid_mid = Tensor3::from_shape({b, T, D});
    a.ln2 = Tensor3::from_shape({b, T, D});
    a.ln2_mean = Tensor2::from_shape({b, T});
    a.ln2_rstd = Tensor2::from_shape({b, T});
    a.fc1 = Tensor3::from_shape({b, T, M});
    a.fc2_in = Tensor3::from_shape({b, T, M});
    if (drop) {
      a.gelu_mask = Mask1::from_shape({b * T * M});
      a.fc2_mask = Mask1::from_shape({b * T * D});
    }
  }
  cls = Tensor2::from_shape({b, D});
  cls_norm = Tensor2::from_shape({b, D});
  cls_mean = Tensor1::from_shape({b});
  cls_rstd = Tensor1::from_shape({b});
  logits = Tensor2::from_shape({b, K});
  probs = Tensor2::from_shape({b, K});
  branch = Tensor3::from_shape({b, T, D});
  if (for_training) {
    dlogits = Tensor2::from_shape({b, K});
    dcls_norm = Tensor2::from_shape({b, D});
    dcls = Tensor2::from_shape({b, D});
    dresid = Tensor3::from_shape({b, T, D});
    dbranch = Tensor3::from_shape({b, T, D});
    dln = Tensor3::from_shape({b, T, D});
    datt_out = Tensor3::from_shape({b, T, D});
    dqkv = Tensor3::from_shape({b, T, 3 * D});
    dfc2_in = Tensor3::from_shape({b, T, M});
    dgelu = Tensor3::from_shape({b, T, M});
    dfc1 = Tensor3::from_shape({b, T, M});
    dpatch_proj = Tensor3::from_shape({b, N, D});
  }
}

int64_t Activations::bytes() const {
  int64_t total = 0;
  auto add = [&](const auto& t) { total += int64_t(t.size() * sizeof(*t.data())); };
  add(patches), add(patch_proj);
  for (const auto& r : resid) add(r);
  for (const auto& a : blocks) {
    add(a.ln1), add(a.ln1_mean), add(a.ln1_rstd), add(a.qkv), add(a.att), add(a.att_mask);
    add(a.att_out), add(a.proj_mask), add(a.resid_mid), add(a.ln2), add(a.ln2_mean);
    add(a.ln2_rstd), add(a.fc1), add(a.fc2_in), add(a.gelu_mask), add(a.fc2_mask);
  }
  add(cls), add(cls_norm), add(cls_mean), add(cls_rstd), add(logits), add(probs), add(branch);
  add(dlogits), add(dcls_norm), add(dcls), add(dresid), add(dbranch), add(dln), add(datt_out);
  add(dqkv), add(dfc2_in), add(dgelu), add(dfc1), add(dpatch_proj);
  return total;
}

// Clears a gradient buffer that backward then adds into: megabytes per layer, so both
// cores share the pass (one core's memset left the other waiting for about 5% of a step).
static void zero(float* p, int64_t n) {
  constexpr int64_t kChunk = 1 << 16;  // floats per piece: 256 KB
  const int64_t pieces = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (pieces > 1)
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t begin = i * kChunk, count = std::min(kChunk, n - begin);
    std::memset(p + begin, 0, size_t(count) * sizeof(float));
  }
}

// out = x + branch (+ bias on every row, when the branch's linear layer left it out):
// the residual adds, with the bias fused in to save a pass over the branch.
static void residual_add(float* out, const float* x, const float* branch, const float* bias,
                         int64_t R, int D) {
#pragma omp parallel for schedule(static) if (R * D > 65536)
  for (int64_t r = 0; r < R; ++r) {
    const int64_t o = r * D;
    if (bias) {
#pragma omp simd
      for (int d = 0; d < D; ++d) out[o + d] = x[o + d] + branch[o + d] + bias[d];
    } else {
#pragma omp simd
      for (int d = 0; d < D; ++d) out[o + d] = x[o + d] + branch[o + d];
    }
  }
}

StepProfile g_step_profile;

// Times a scope into g_step_profile.attention_seconds when profiling is on.
struct AttentionTimer {
  std::chrono::steady_clock::time_point start;
  AttentionTimer() {
    if (g_step_profile.enabled) start = std::chrono::steady_clock::now();
  }
  ~AttentionTimer() {
    if (g_step_profile.enabled)
      g_step_profile.attention_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

// Sites of dropout inside one block, so that every mask has its own stream.
enum DropoutSite : uint64_t { kSiteAttention = 0, kSiteProj = 1, kSiteGelu = 2, kSiteFc2 = 3 };

void vit_forward(const ViT& model, Activations& acts, const float* images, int B, bool training,
                 uint64_t dropout_key) {
  const ModelConfig& c = model.config;
  const ViTParams& w = model.w;
  const int T = c.tokens(), N = c.patches(), D = c.dim, M = c.mlp_dim, H = c.heads;
  const int K = c.num_classes;
  const int BT = B * T;
  const float p = training ? c.dropout : 0.0f;
  const float p_att = training ? c.attention_dropout : 0.0f;

  patchify(acts.patches.data(), images, B, c.channels, c.image_size, c.patch_size);
  linear_forward(acts.patch_proj.data(), acts.patches.data(), w.patch_w, w.patch_b, B * N,
                 c.patch_len(), D);
  embed_tokens_forward(acts.resid[0].data(), acts.patch_proj.data(), w.cls_token, w.pos_embed,
                       B, N, D);

  for (int l = 0; l < c.depth; ++l) {
    const BlockParams& bw = w.blocks[size_t(l)];
    BlockActivations& a = acts.blocks[size_t(l)];
    const float* x = acts.resid[size_t(l)].data();
    float* x_next = acts.resid[size_t(l) + 1].data();
    float* branch = acts.branch.data();
    auto key = [&](DropoutSite site) { return rng_key(dropout_key, uint64_t(l), site); };

    // x_mid = x + drop(proj(attn(LN1(x))))
    layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, bw.norm1_w,
                      bw.norm1_b, BT, D);
    linear_forward(a.qkv.data(), a.ln1.data(), bw.qkv_w, bw.qkv_b, BT, D, 3 * D);
    {
      AttentionTimer timer;
      attention_forward(a.att_out.data(), a.att.data(), a.att_mask.data(), a.qkv.data(), B, T, D,
                        H, p_att, key(kSiteAttention));
    }
    // Without dropout the projection's bias is added in the residual pass instead.
    const bool fuse_bias = p == 0.0f;
    linear_forward(branch, a.att_out.data(), bw.proj_w, fuse_bias ? nullptr : bw.proj_b, BT, D, D);
    dropout_forward(branch, a.proj_mask.data(), branch, int64_t(BT) * D, p, key(kSiteProj));
    residual_add(a.resid_mid.data(), x, branch, fuse_bias ? bw.proj_b : nullptr, BT, D);

    // x_next = x_mid + drop(fc2(drop(GELU(fc1(LN2(x_mid))))))
    layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.resid_mid.data(),
                      bw.norm2_w, bw.norm2_b, BT, D);
    linear_forward(a.fc1.data(), a.ln2.data(), bw.fc1_w, nullptr, BT, D, M);
    bias_gelu_forward(a.fc2_in.data(), a.fc1.data(), bw.fc1_b, BT, M);
    dropout_forward(a.fc2_in.data(), a.gelu_mask.data(), a.fc2_in.data(), int64_t(BT) * M, p,
                    key(kSiteGelu));
    linear_forward(branch, a.fc2_in.data(), bw.fc2_w, fuse_bias ? nullptr : bw.fc2_b, BT, M, D);
    dropout_forward(branch, a.fc2_mask.data(), branch, int64_t(BT) * D, p, key(kSiteFc2));
    residual_add(x_next, a.resid_mid.data(), branch, fuse_bias ? bw.fc2_b : nullptr, BT, D);
  }

  // The head reads only the CLS token, so the final LayerNorm runs on those rows alone.
  const float* last = acts.resid[size_t(c.depth)].data();
  for (int b = 0; b < B; ++b)
    std::copy_n(last + int64_t(b) * T * D, D, acts.cls.data() + int64_t(b) * D);
  layernorm_forward(acts.cls_norm.data(), acts.cls_mean.data(), acts.cls_rstd.data(),
                    acts.cls.data(), w.norm_w, w.norm_b, B, D);
  linear_forward(acts.logits.data(), acts.cls_norm.data(), w.head_w, w.head_b, B, D, K);
}

void vit_backward(ViT& model, Activations& acts, int B) {
  const ModelConfig& c = model.config;
  const ViTParams& w = model.w;
  ViTParams& g = model.g;
  const int T = c.tokens(), N = c.patches(), D = c.dim, M = c.mlp_dim, H = c.heads;
  const int K = c.num_classes;
  const int BT = B * T;
  const int64_t BTD = int64_t(BT) * D, BTM = int64_t(BT) * M;
  const float p = c.dropout;
  const float p_att = c.attention_dropout;

  // logits = head(LN(cls))
  zero(acts.dcls_norm.data(), int64_t(B) * D);
  linear_backward(acts.dcls_norm.data(), g.head_w, g.head_b, acts.dlogits.data(),
                  acts.cls_norm.data(), w.head_w, B, D, K);
  zero(acts.dcls.data(), int64_t(B) * D);
  layernorm_backward(acts.dcls.data(), g.norm_w, g.norm_b, acts.dcls_norm.data(),
                     acts.cls.data(), w.norm_w, acts.cls_mean.data(), acts.cls_rstd.data(), B,
                     D);
  float* dx = acts.dresid.data();
  zero(dx, BTD);
  for (int b = 0; b < B; ++b)
    std::copy_n(acts.dcls.data() + int64_t(b) * D, D, dx + int64_t(b) * T * D);

  for (int l = c.depth - 1; l >= 0; --l) {
    const BlockParams& bw = w.blocks[size_t(l)];
    BlockParams& bg = g.blocks[size_t(l)];
    BlockActivations& a = acts.blocks[size_t(l)];

    // x_next = x_mid + drop(fc2(fc2_in)): dx is d x_next here, and becomes d x_mid below.
    const float* dfc2_out = dx;
    if (p > 0.0f) {
      zero(acts.dbranch.data(), BTD);
      dropout_backward(acts.dbranch.data(), dx, a.fc2_mask.data(), BTD, p);
      dfc2_out = acts.dbranch.data();
    }
    zero(acts.dfc2_in.data(), BTM);
    linear_backward(acts.dfc2_in.data(), bg.fc2_w, bg.fc2_b, dfc2_out, a.fc2_in.data(),
                    bw.fc2_w, BT, M, D);
    // fc2_in = drop(GELU(fc1))
    const float* dgelu = acts.dfc2_in.data();
    if (p > 0.0f) {
      zero(acts.dgelu.data(), BTM);
      dropout_backward(acts.dgelu.data(), acts.dfc2_in.data(), a.gelu_mask.data(), BTM, p);
      dgelu = acts.dgelu.data();
    }
    zero(acts.dfc1.data(), BTM);
    gelu_backward(acts.dfc1.data(), a.fc1.data(), dgelu, BTM);
    // fc1 = linear(LN2(x_mid)); the residual path already carries dx into x_mid.
    zero(acts.dln.data(), BTD);
    linear_backward(acts.dln.data(), bg.fc1_w, bg.fc1_b, acts.dfc1.data(), a.ln2.data(),
                    bw.fc1_w, BT, D, M);
    layernorm_backward(dx, bg.norm2_w, bg.norm2_b, acts.dln.data(), a.resid_mid.data(),
                       bw.norm2_w, a.ln2_mean.data(), a.ln2_rstd.data(), BT, D);

    // x_mid = x + drop(proj(att_out)): dx becomes d x.
    const float* dproj_out = dx;
    if (p > 0.0f) {
      zero(acts.dbranch.data(), BTD);
      dropout_backward(acts.dbranch.data(), dx, a.proj_mask.data(), BTD, p);
      dproj_out = acts.dbranch.data();
    }
    zero(acts.datt_out.data(), BTD);
    linear_backward(acts.datt_out.data(), bg.proj_w, bg.proj_b, dproj_out, a.att_out.data(),
                    bw.proj_w, BT, D, D);
    zero(acts.dqkv.data(), 3 * BTD);
    {
      AttentionTimer timer;
      attention_backward(acts.dqkv.data(), acts.datt_out.data(), a.qkv.data(), a.att.data(),
                         a.att_mask.data(), B, T, D, H, p_att);
    }
    zero(acts.dln.data(), BTD);
    linear_backward(acts.dln.data(), bg.qkv_w, bg.qkv_b, acts.dqkv.data(), a.ln1.data(),
                    bw.qkv_w, BT, D, 3 * D);
    layernorm_backward(dx, bg.norm1_w, bg.norm1_b, acts.dln.data(), acts.resid[size_t(l)].data(),
                       bw.norm1_w, a.ln1_mean.data(), a.ln1_rstd.data(), BT, D);
  }

  // tokens = [cls; patch_proj] + pos;  patch_proj = linear(patches)
  zero(acts.dpatch_proj.data(), int64_t(B) * N * D);
  embed_tokens_backward(acts.dpatch_proj.data(), g.cls_token, g.pos_embed, dx, B, N, D);
  linear_backward(nullptr, g.patch_w, g.patch_b, acts.dpatch_proj.data(), acts.patches.data(),
                  w.patch_w, B * N, c.patch_len(), D);
}

double vit_forward_flops(const ModelConfig& c) {
  const double T = c.tokens(), N = c.patches(), D = c.dim, M = c.mlp_dim, K = c.num_classes;
  const double per_block = 2 * T * D * 3 * D   // qkv
                           + 2 * 2 * T * T * D  // q k^T and P v over all heads
                           + 2 * T * D * D      // proj
                           + 2 * 2 * T * D * M; // fc1, fc2
  return 2 * N * c.patch_len() * D + c.depth * per_block + 2 * D * K;
}

}  // namespace minivit

namespace minivit {

double vit_train_flops(const ModelConfig& c) {
  const double patch_input_grad = 2.0 * c.patches() * c.patch_len() * c.dim;
  return 3 * vit_forward_flops(c) - patch_input_grad;
}

}  // namespace minivit

namespace minivit {

double vit_attention_flop_share(const ModelConfig& c) {
  const double T = c.tokens(), D = c.dim;
  return c.depth * 2 * 2 * T * T * D / vit_forward_flops(c);
}

}  // namespace minivit
