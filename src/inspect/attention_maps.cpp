#include "minivit/inspect/attention_maps.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "minivit/core/error.h"
#include "minivit/core/progress.h"
#include "minivit/data/dataset.h"
#include "minivit/formats/config_file.h"
#include "minivit/model/predict.h"

namespace minivit {

AttentionMaps attention_maps_of(const ModelConfig& c, const Activations& acts) {
  const size_t L = size_t(c.depth), H = size_t(c.heads), T = size_t(c.tokens());
  AttentionMaps m;
  m.att = Tensor4::from_shape({L, H, T, T});
  m.pool = c.pool;
  for (size_t l = 0; l < L; ++l)
    std::copy_n(acts.blocks[l].att, H * T * T, m.att.data() + l * H * T * T);
  if (c.pool == PoolKind::seq) m.pool_weights.assign(acts.pool_weights, acts.pool_weights + T);
  m.logits.assign(acts.logits, acts.logits + c.num_classes);
  m.probs = class_probabilities(m.logits.data(), c.num_classes);
  return m;
}

AttentionMaps collect_attention(const ViT& model, const float* image) {
  Activations acts(model.config, 1, ActivationsFor::inspection);
  vit_forward(model, acts, image, 1, false, 0);
  return attention_maps_of(model.config, acts);
}

// ---------------------------------------------------------------------------------------
// Rollout

Fusion parse_fusion(const std::string& text, const std::string& what) {
  if (text == "mean") return Fusion::mean;
  if (text == "max") return Fusion::max;
  if (text == "min") return Fusion::min;
  throw Error(what + ": '" + text + "' is not one of mean, max, min");
}

const char* fusion_name(Fusion fusion) {
  switch (fusion) {
    case Fusion::mean: return "mean";
    case Fusion::max: return "max";
    case Fusion::min: return "min";
  }
  return "?";
}

Tensor2 fuse_heads(const Tensor3& heads, Fusion fusion) {
  const size_t H = heads.shape(0), TT = heads.shape(1) * heads.shape(2);
  Tensor2 out = Tensor2::from_shape({heads.shape(1), heads.shape(2)});
  const float* p = heads.data();
  for (size_t i = 0; i < TT; ++i) {
    double acc = p[i];
    for (size_t h = 1; h < H; ++h) {
      const double v = p[h * TT + i];
      if (fusion == Fusion::mean) acc += v;
      else if (fusion == Fusion::max) acc = std::max(acc, v);
      else acc = std::min(acc, v);
    }
    out.data()[i] = float(fusion == Fusion::mean ? acc / double(H) : acc);
  }
  return out;
}

// The first column of `att` that is a patch: 1 behind a CLS token, else 0.
static size_t first_patch(PoolKind pool) { return pool == PoolKind::cls ? 1 : 0; }

void discard_lowest(Tensor2& a, PoolKind pool, double ratio) {
  const size_t T = a.shape(0), first = first_patch(pool);
  if (!(ratio > 0.0) || T <= first) return;
  std::vector<size_t> candidates;  // flat positions outside a CLS column
  candidates.reserve(T * (T - first));
  for (size_t r = 0; r < T; ++r)
    for (size_t c = first; c < T; ++c) candidates.push_back(r * T + c);
  const size_t k = std::min(candidates.size(), size_t(std::floor(ratio * double(candidates.size()))));
  if (k == 0) return;
  float* v = a.data();
  auto lower = [v](size_t i, size_t j) { return v[i] < v[j] || (v[i] == v[j] && i < j); };
  std::nth_element(candidates.begin(), candidates.begin() + ptrdiff_t(k - 1), candidates.end(), lower);
  for (size_t i = 0; i < k; ++i) v[candidates[i]] = 0.f;
}

Tensor2 rollout_chain(const std::vector<Tensor2>& layers) {
  const size_t T = layers.empty() ? 0 : layers[0].shape(0);
  std::vector<double> joint(T * T, 0.0), next(T * T), a(T * T);
  for (size_t i = 0; i < T; ++i) joint[i * T + i] = 1.0;
  for (const Tensor2& layer : layers) {
    for (size_t i = 0; i < T; ++i) {
      double sum = 0.0;
      for (size_t j = 0; j < T; ++j)
        sum += a[i * T + j] = double(layer(i, j)) + (i == j ? 1.0 : 0.0);
      for (size_t j = 0; j < T; ++j) a[i * T + j] /= sum;
    }
    // joint = A_l @ joint: layer l acts on what the layers below have already mixed.
    for (size_t i = 0; i < T; ++i)
      for (size_t j = 0; j < T; ++j) {
        double s = 0.0;
        for (size_t k = 0; k < T; ++k) s += a[i * T + k] * joint[k * T + j];
        next[i * T + j] = s;
      }
    joint.swap(next);
  }
  Tensor2 out = Tensor2::from_shape({T, T});
  std::transform(joint.begin(), joint.end(), out.data(), [](double x) { return float(x); });
  return out;
}

Tensor2 rollout_matrix(const Tensor4& att, PoolKind pool, Fusion fusion, double discard_ratio) {
  const size_t L = att.shape(0), H = att.shape(1), T = att.shape(2);
  std::vector<Tensor2> layers;
  for (size_t l = 0; l < L; ++l) {
    Tensor3 heads = Tensor3::from_shape({H, T, T});
    std::copy_n(att.data() + l * H * T * T, H * T * T, heads.data());
    layers.push_back(fuse_heads(heads, fusion));
    discard_lowest(layers.back(), pool, discard_ratio);
  }
  return rollout_chain(layers);
}

// The side of the patch grid of maps over T tokens; throws unless the patches are a square.
static size_t grid_side(size_t T, PoolKind pool) {
  const size_t first = first_patch(pool);
  const size_t G = T > first ? size_t(std::lround(std::sqrt(double(T - first)))) : 0;
  if (G == 0 || G * G + first != T)
    throw Error("attention maps have " + std::to_string(T) + " tokens, expected " +
                (first ? "1 + " : "") + "a square number of patches");
  return G;
}

// The T rows of a (T, T) matrix combined as the head combines the tokens, over the patch
// columns: the CLS row without its CLS column, the mean of the rows, or their sum weighted
// by the pooling weights.
static std::vector<float> read_rows(const float* rows, size_t T, const Readout& readout) {
  if (readout.pool == PoolKind::cls) return std::vector<float>(rows + 1, rows + T);
  const bool weighted = readout.pool == PoolKind::seq;
  if (weighted && readout.token_weights.size() != T)
    throw Error("sequence pooling's attention is read with one pooling weight per token: got " +
                std::to_string(readout.token_weights.size()) + " weights for " +
                std::to_string(T) + " tokens");
  std::vector<double> sum(T, 0.0);
  for (size_t i = 0; i < T; ++i) {
    const double w = weighted ? double(readout.token_weights[i]) : 1.0;
    for (size_t j = 0; j < T; ++j) sum[j] += w * rows[i * T + j];
  }
  std::vector<float> out(T);
  for (size_t j = 0; j < T; ++j) out[j] = float(weighted ? sum[j] : sum[j] / double(T));
  return out;
}

Tensor2 readout_rollout(const Tensor2& joint, const Readout& readout) {
  const size_t T = joint.shape(0), G = grid_side(T, readout.pool);
  const std::vector<float> patches = read_rows(joint.data(), T, readout);
  Tensor2 out = Tensor2::from_shape({G, G});
  std::copy_n(patches.data(), G * G, out.data());
  return out;
}

Tensor2 attention_rollout(const Tensor4& att, const Readout& readout, Fusion fusion,
                          double discard_ratio) {
  return readout_rollout(rollout_matrix(att, readout.pool, fusion, discard_ratio), readout);
}

std::vector<float> readout_attention(const Tensor4& att, const Readout& readout, int layer,
                                     int head) {
  const size_t H = att.shape(1), T = att.shape(2);
  return read_rows(att.data() + (size_t(layer) * H + size_t(head)) * T * T, T, readout);
}

const char* readout_name(PoolKind pool) {
  switch (pool) {
    case PoolKind::cls: return "the CLS token";
    case PoolKind::mean: return "the mean of all tokens";
    case PoolKind::seq: return "the sequence-pooled tokens";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------
// Statistics

std::vector<PatchWeight> top_patches(const float* weights, int grid, int k) {
  const int n = grid * grid;
  std::vector<int> order(size_t(n), 0);
  std::iota(order.begin(), order.end(), 0);
  k = std::clamp(k, 0, n);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [weights](int i, int j) {
    return weights[i] > weights[j] || (weights[i] == weights[j] && i < j);
  });
  std::vector<PatchWeight> out;
  for (int i = 0; i < k; ++i) {
    const int p = order[size_t(i)];
    out.push_back({p, p / grid, p % grid, weights[p]});
  }
  return out;
}

double patch_entropy(const float* weights, int n) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::max(0.0, double(weights[i]));
  if (!(sum > 0.0)) return 0.0;
  double h = 0.0;
  for (int i = 0; i < n; ++i) {
    const double p = std::max(0.0, double(weights[i])) / sum;
    if (p > 0.0) h -= p * std::log(p);
  }
  return h;
}

nlohmann::ordered_json patches_json(const std::vector<PatchWeight>& top) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const PatchWeight& p : top)
    out.push_back({{"patch", p.patch}, {"row", p.row}, {"col", p.col}, {"weight", p.weight}});
  return out;
}

// What summary.json says about the numbers it holds, for each thing the head may read.
struct SummaryTexts {
  const char* readout;
  const char* entropy_over;
  const char* top_patches_weight;
  const char* rollout_definition;
  const char* attention_file;
  const char* grid_file;
};

constexpr SummaryTexts kClsSummaryTexts = {
    "the CLS token: the head reads its final state (model.pool = cls)",
    "patches: the CLS row of each head without its CLS column, renormalised to sum 1; "
    "natural log (nats); uniform attention gives entropy_uniform = ln(patches)",
    "the raw attention weight of the CLS token on that patch (not renormalised); "
    "row and col are the patch's position in the grid, patch = row * grid + col",
    "A_l = rownorm(discard(fuse_heads(attention[l])) + I); rollout = A_L ... A_2 A_1; "
    "rollout.npy = row 0 (CLS) over columns 1..N as [grid, grid], not renormalised. "
    "discard zeroes the floor(discard * T * (T-1)) smallest fused entries outside column 0",
    "float32 [layers, heads, T, T], T = 1 + patches, CLS first; row i: where token i looks, "
    "sums to 1",
    "CLS-to-patch attention per layer (rows) and head (columns)"};

constexpr SummaryTexts kMeanSummaryTexts = {
    "the mean of all tokens: there is no CLS token, the head reads the mean of the final "
    "states of the patch tokens (model.pool = mean)",
    "patches: the mean of all token rows of each head (a distribution over the patches); "
    "natural log (nats); uniform attention gives entropy_uniform = ln(patches)",
    "the attention weight on that patch averaged over all tokens' rows; "
    "row and col are the patch's position in the grid, patch = row * grid + col",
    "A_l = rownorm(discard(fuse_heads(attention[l])) + I); rollout = A_L ... A_2 A_1; "
    "rollout.npy = the mean of all rows as [grid, grid] (sums to 1). "
    "discard zeroes the floor(discard * T * T) smallest fused entries",
    "float32 [layers, heads, T, T], T = patches (no CLS token); row i: where token i looks, "
    "sums to 1",
    "mean-over-tokens attention per layer (rows) and head (columns)"};

constexpr SummaryTexts kSeqSummaryTexts = {
    "the sequence-pooled tokens: there is no CLS token, the head reads the final states of "
    "the patch tokens weighted by learned scores (model.pool = seq; pool_weights.npy holds "
    "this image's weights, the softmax of the scores over the tokens)",
    "patches: the token rows of each head weighted by the pooling weights (a distribution "
    "over the patches); natural log (nats); uniform attention gives entropy_uniform = "
    "ln(patches)",
    "the attention weight on that patch of the token rows weighted by the pooling weights; "
    "row and col are the patch's position in the grid, patch = row * grid + col",
    "A_l = rownorm(discard(fuse_heads(attention[l])) + I); rollout = A_L ... A_2 A_1; "
    "rollout.npy = the rows weighted by the pooling weights, pool_weights . rollout, as "
    "[grid, grid] (sums to 1). discard zeroes the floor(discard * T * T) smallest fused "
    "entries",
    "float32 [layers, heads, T, T], T = patches (no CLS token); row i: where token i looks, "
    "sums to 1",
    "pooling-weighted attention per layer (rows) and head (columns)"};

static const SummaryTexts& summary_texts(PoolKind pool) {
  if (pool == PoolKind::seq) return kSeqSummaryTexts;
  return pool == PoolKind::cls ? kClsSummaryTexts : kMeanSummaryTexts;
}

nlohmann::ordered_json attention_summary(const SummaryInputs& in) {
  const Tensor4& att = in.maps->att;
  const PoolKind pool = in.maps->pool;
  const SummaryTexts& texts = summary_texts(pool);
  const int L = int(att.shape(0)), H = int(att.shape(1)), T = int(att.shape(2));
  const int N = T - int(first_patch(pool)), G = int(in.rollout->shape(0));
  nlohmann::ordered_json j;
  nlohmann::ordered_json top5 = nlohmann::ordered_json::array();
  const std::vector<std::string> class_names =
      class_names_for(in.class_names ? *in.class_names : std::vector<std::string>(),
                      int(in.maps->probs.size()));
  for (const ClassScore& s : top_classes(in.maps->probs, 5))
    top5.push_back({{"class", class_names[size_t(s.index)]}, {"index", s.index},
                    {"probability", s.probability}});
  j["prediction"] = {{"class", top5[0]["class"]}, {"index", top5[0]["index"]},
                     {"probability", top5[0]["probability"]}, {"top5", top5}};
  j["input"] = in.source;
  j["layers"] = L, j["heads"] = H, j["tokens"] = T, j["grid"] = G;
  j["pool"] = config_name(pool);
  j["readout"] = texts.readout;

  j["entropy_over"] = texts.entropy_over;
  j["entropy_uniform"] = std::log(double(N));
  j["top_patches_weight"] = texts.top_patches_weight;
  const Readout readout = in.maps->readout();
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (int l = 0; l < L; ++l) {
    nlohmann::ordered_json heads = nlohmann::ordered_json::array();
    for (int h = 0; h < H; ++h) {
      const std::vector<float> to_patches = readout_attention(att, readout, l, h);
      nlohmann::ordered_json head = {{"head", h}, {"entropy", patch_entropy(to_patches.data(), N)}};
      if (pool == PoolKind::cls) {
        double mass = 0.0;
        for (float w : to_patches) mass += w;
        head["cls_to_cls"] = att(size_t(l), size_t(h), 0, 0);
        head["cls_to_patches"] = mass;
      }
      head["top_patches"] = patches_json(top_patches(to_patches.data(), G, 5));
      heads.push_back(head);
    }
    layers.push_back({{"layer", l}, {"heads", heads}});
  }
  j["attention"] = layers;

  double rollout_mass = 0.0;
  for (size_t i = 0; i < in.rollout->size(); ++i) rollout_mass += in.rollout->data()[i];
  j["rollout"] = {
      {"fusion", fusion_name(in.fusion)},
      {"discard", in.discard},
      {"definition", texts.rollout_definition},
      {"patch_mass", rollout_mass},
      {"top_patches", patches_json(top_patches(in.rollout->data(), G, 5))}};
  if (pool == PoolKind::seq)
    j["pool_weights"] = {
        {"definition", "softmax over the tokens of a learned score of each final state: the "
                       "share of each patch's final state in what the head reads"},
        {"top_patches", patches_json(top_patches(in.maps->pool_weights.data(), G, 5))}};
  j["files"] = {
      {"attention.npy", texts.attention_file},
      {"rollout.npy", "float32 [grid, grid]"},
      {"input.npy", "float32 [channels, size, size]: the normalised image the model saw"},
      {"input.png", "the image as the model saw it (denormalised), upscaled"},
      {"grid.png", texts.grid_file},
      {"rollout.png", "attention rollout over the input"},
      {"grad_rollout.npy", "float32 [grid, grid]: class-specific gradient rollout (see grad_rollout)"},
      {"grad_rollout.png", "the gradient rollout over the input"},
      {"thumb.png", "small input with the gradient rollout over it, for galleries"},
      {"index.html", "explorer: open in a browser, click any patch to see where it looks"}};
  if (pool == PoolKind::seq)
    j["files"]["pool_weights.npy"] = "float32 [grid, grid]: the sequence pooling's weights";
  return j;
}

}  // namespace minivit
