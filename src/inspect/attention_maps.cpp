#include "minivit/inspect/attention_maps.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "minivit/core/error.h"
#include "minivit/core/progress.h"
#include "minivit/data/dataset.h"
#include "minivit/model/predict.h"

namespace minivit {

AttentionMaps collect_attention(const ViT& model, const float* image) {
  const ModelConfig& c = model.config;
  const size_t L = size_t(c.depth), H = size_t(c.heads), T = size_t(c.tokens());
  Activations acts(c, 1, false);
  vit_forward(model, acts, image, 1, false, 0);
  AttentionMaps m;
  m.att = Tensor4::from_shape({L, H, T, T});
  for (size_t l = 0; l < L; ++l)
    std::copy_n(acts.blocks[l].att, H * T * T, m.att.data() + l * H * T * T);
  m.logits.assign(acts.logits, acts.logits + c.num_classes);
  m.probs = class_probabilities(m.logits.data(), c.num_classes);
  return m;
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

void discard_lowest(Tensor2& a, double ratio) {
  const size_t T = a.shape(0);
  if (!(ratio > 0.0) || T < 2) return;
  std::vector<size_t> candidates;  // flat positions outside column 0
  candidates.reserve(T * (T - 1));
  for (size_t r = 0; r < T; ++r)
    for (size_t c = 1; c < T; ++c) candidates.push_back(r * T + c);
  const size_t k = std::min(candidates.size(), size_t(std::floor(ratio * double(candidates.size()))));
  if (k == 0) return;
  float* v = a.data();
  auto lower = [v](size_t i, size_t j) { return v[i] < v[j] || (v[i] == v[j] && i < j); };
  std::nth_element(candidates.begin(), candidates.begin() + ptrdiff_t(k - 1), candidates.end(), lower);
  for (size_t i = 0; i < k; ++i) v[candidates[i]] = 0.f;
}

Tensor2 rollout_matrix(const Tensor4& att, Fusion fusion, double discard_ratio) {
  const size_t L = att.shape(0), H = att.shape(1), T = att.shape(2);
  std::vector<double> joint(T * T, 0.0), next(T * T), a(T * T);
  for (size_t i = 0; i < T; ++i) joint[i * T + i] = 1.0;
  for (size_t l = 0; l < L; ++l) {
    Tensor3 heads = Tensor3::from_shape({H, T, T});
    std::copy_n(att.data() + l * H * T * T, H * T * T, heads.data());
    Tensor2 fused = fuse_heads(heads, fusion);
    discard_lowest(fused, discard_ratio);
    for (size_t i = 0; i < T; ++i) {
      double sum = 0.0;
      for (size_t j = 0; j < T; ++j)
        sum += a[i * T + j] = double(fused(i, j)) + (i == j ? 1.0 : 0.0);
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

Tensor2 attention_rollout(const Tensor4& att, Fusion fusion, double discard_ratio) {
  const size_t T = att.shape(2);
  const size_t G = size_t(std::lround(std::sqrt(double(T - 1))));
  if (G * G + 1 != T)
    throw Error("attention maps have " + std::to_string(T) + " tokens, expected 1 + a square number of patches");
  Tensor2 joint = rollout_matrix(att, fusion, discard_ratio);
  Tensor2 out = Tensor2::from_shape({G, G});
  std::copy_n(joint.data() + 1, G * G, out.data());
  return out;
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

static nlohmann::ordered_json patches_json(const std::vector<PatchWeight>& top) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const PatchWeight& p : top)
    out.push_back({{"patch", p.patch}, {"row", p.row}, {"col", p.col}, {"weight", p.weight}});
  return out;
}

nlohmann::ordered_json attention_summary(const SummaryInputs& in) {
  const Tensor4& att = in.maps->att;
  const int L = int(att.shape(0)), H = int(att.shape(1)), T = int(att.shape(2));
  const int N = T - 1, G = int(in.rollout->shape(0));
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

  j["entropy_over"] =
      "patches: the CLS row of each head without its CLS column, renormalised to sum 1; "
      "natural log (nats); uniform attention gives entropy_uniform = ln(patches)";
  j["entropy_uniform"] = std::log(double(N));
  j["top_patches_weight"] = "the raw attention weight of the CLS token on that patch (not renormalised); "
                            "row and col are the patch's position in the grid, patch = row * grid + col";
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (int l = 0; l < L; ++l) {
    nlohmann::ordered_json heads = nlohmann::ordered_json::array();
    for (int h = 0; h < H; ++h) {
      const float* cls_row = att.data() + ((size_t(l) * H + size_t(h)) * T) * T;
      const float* to_patches = cls_row + 1;
      double mass = 0.0;
      for (int p = 0; p < N; ++p) mass += to_patches[p];
      heads.push_back({{"head", h},
                       {"entropy", patch_entropy(to_patches, N)},
                       {"cls_to_cls", cls_row[0]},
                       {"cls_to_patches", mass},
                       {"top_patches", patches_json(top_patches(to_patches, G, 5))}});
    }
    layers.push_back({{"layer", l}, {"heads", heads}});
  }
  j["attention"] = layers;

  double rollout_mass = 0.0;
  for (size_t i = 0; i < in.rollout->size(); ++i) rollout_mass += in.rollout->data()[i];
  j["rollout"] = {
      {"fusion", fusion_name(in.fusion)},
      {"discard", in.discard},
      {"definition",
       "A_l = rownorm(discard(fuse_heads(attention[l])) + I); rollout = A_L ... A_2 A_1; "
       "rollout.npy = row 0 (CLS) over columns 1..N as [grid, grid], not renormalised. "
       "discard zeroes the floor(discard * T * (T-1)) smallest fused entries outside column 0"},
      {"patch_mass", rollout_mass},
      {"top_patches", patches_json(top_patches(in.rollout->data(), G, 5))}};
  j["files"] = {
      {"attention.npy", "float32 [layers, heads, T, T], T = 1 + patches, CLS first; row i: where token i looks, sums to 1"},
      {"rollout.npy", "float32 [grid, grid]"},
      {"input.npy", "float32 [channels, size, size]: the normalised image the model saw"},
      {"input.png", "the image as the model saw it (denormalised), upscaled"},
      {"grid.png", "CLS-to-patch attention per layer (rows) and head (columns)"},
      {"rollout.png", "attention rollout over the input"}};
  return j;
}

}  // namespace minivit
