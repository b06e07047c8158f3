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

// ---------------------------------------------------------------------------------------
// Pictures

static const Color kInk = {20, 20, 20};
static const Color kMuted = {100, 100, 100};
static const Color kMark = {230, 40, 40};  // not in viridis, so it stands out on any tile

// A side for showing an S x S image: a whole multiple of S near `target` (so every input
// pixel and every patch covers the same number of screen pixels), or `target` itself when
// the image is larger.
static int display_side(int S, int target) {
  if (S >= target) return target;
  return S * ((target + S / 2) / S);
}

static void draw_image(Canvas& canvas, int x, int y, int side, const Image8& image) {
  const int C = int(image.shape(0)), S = int(image.shape(1));
  if (C >= 3)
    canvas.draw_image_rgb(x, y, side, side, image.data(), S, S);
  else
    canvas.draw_image_gray(x, y, side, side, image.data(), S, S);
}

// A horizontal viridis bar, low on the left.
static void draw_colorbar(Canvas& canvas, int x, int y, int w, int h) {
  for (int i = 0; i < w; ++i)
    canvas.fill_rect(x + i, y, 1, h, colormap(w > 1 ? float(i) / float(w - 1) : 0.f));
  canvas.draw_rect(x - 1, y - 1, w + 2, h + 2, kMuted);
}

// The heat map of one (G, G) map over the image at (x, y, side, side), scaled to its own
// min..max, with the largest cell outlined.
static void draw_overlay(Canvas& canvas, int x, int y, int side, const Image8& image,
                         const float* map, int G) {
  draw_image(canvas, x, y, side, image);
  // Darken the image first: under a translucent colour map a bright object would otherwise
  // tint the least-attended colour towards the middle of the scale and read as attention.
  for (int py = y; py < y + side; ++py)
    for (int px = x; px < x + side; ++px) canvas.put(px, py, {0, 0, 0}, 0.45f);
  const auto [lo, hi] = std::minmax_element(map, map + G * G);
  canvas.blend_heatmap(x, y, side, side, map, G, G, 0.75f, *lo, *hi, Interp::nearest);
  if (*hi - *lo <= 1e-6f * *hi) return;  // uniform: no patch stands out, so box none
  const int best = int(hi - map);
  const int x0 = x + (best % G) * side / G, x1 = x + (best % G + 1) * side / G;
  const int y0 = y + (best / G) * side / G, y1 = y + (best / G + 1) * side / G;
  canvas.draw_rect(x0, y0, x1 - x0, y1 - y0, kMark, std::max(1, side / 100));
}

static std::string fixed(double v, int digits) { return strprintf("%.*f", digits, v); }

Canvas render_input(const Image8& image, int min_side) {
  const int S = int(image.shape(1));
  const int side = S * std::max(1, (min_side + S - 1) / S);
  Canvas canvas(side, side);
  draw_image(canvas, 0, 0, side, image);
  return canvas;
}

// The two legend lines under the title of grid.png.
static std::vector<std::string> grid_legend(int G) {
  return {strprintf("Row = layer, column = head. Each tile: where the CLS token looks among the %dx%d patches.", G, G),
          "Colour scaled per tile from its least to its most attended patch; red box = top patch."};
}
constexpr int kMargin = 16;
constexpr int kColorbarWidth = 100;

GridLayout grid_layout(int layers, int heads, int grid, int image_size, const std::string& title) {
  int label_w = 0;
  for (int l = 0; l < layers; ++l) label_w = std::max(label_w, text_width("layer " + std::to_string(l), 2));
  int legend_w = 0;
  for (const std::string& line : grid_legend(grid)) legend_w = std::max(legend_w, text_width(line));
  const int gap = 10, caption = 16;
  GridLayout g;
  g.tile = display_side(image_size, 140);
  g.left = kMargin + label_w + 8;
  // title, two legend lines, head labels
  g.top = kMargin + 2 * kTextLineHeight + 6 + 2 * kTextLineHeight + 10 + 2 * kTextLineHeight;
  g.step_x = g.tile + gap;
  g.step_y = g.tile + caption + gap;
  g.width = std::max({g.left + heads * g.step_x - gap + kMargin, 2 * kMargin + text_width(title, 2),
                      kMargin + legend_w + 24 + text_width("least most") + kColorbarWidth + 20 + kMargin});
  g.height = g.top + layers * g.step_y - gap + kMargin;
  return g;
}

Canvas render_grid(const Image8& image, const Tensor4& att, const std::string& title) {
  const int L = int(att.shape(0)), H = int(att.shape(1)), T = int(att.shape(2));
  const int G = int(std::lround(std::sqrt(double(T - 1))));
  const int S = int(image.shape(1));
  const GridLayout g = grid_layout(L, H, G, S, title);
  Canvas canvas(g.width, g.height);

  int y = kMargin;
  canvas.draw_text(kMargin, y, title, kInk, 2);
  y += 2 * kTextLineHeight + 6;
  const std::vector<std::string> legend = grid_legend(G);
  int legend_w = 0;
  for (size_t i = 0; i < legend.size(); ++i) {
    canvas.draw_text(kMargin, y + int(i) * kTextLineHeight, legend[i], kMuted);
    legend_w = std::max(legend_w, text_width(legend[i]));
  }
  const int bar_x = kMargin + legend_w + 24;
  canvas.draw_text(bar_x, y + 5, "least", kMuted);
  draw_colorbar(canvas, bar_x + text_width("least") + 4, y + 4, kColorbarWidth, 12);
  canvas.draw_text(bar_x + text_width("least") + kColorbarWidth + 10, y + 5, "most", kMuted);

  for (int h = 0; h < H; ++h) {
    const std::string label = "head " + std::to_string(h);
    canvas.draw_text(g.tile_x(h) + (g.tile - text_width(label, 2)) / 2, g.top - 2 * kTextLineHeight, label, kInk, 2);
  }
  std::vector<float> map(size_t(G) * G);
  for (int l = 0; l < L; ++l) {
    canvas.draw_text(kMargin, g.tile_y(l) + g.tile / 2 - kTextCapHeight, "layer " + std::to_string(l), kInk, 2);
    for (int h = 0; h < H; ++h) {
      const float* cls_row = att.data() + (size_t(l) * H + size_t(h)) * size_t(T) * T;
      std::copy_n(cls_row + 1, map.size(), map.begin());
      draw_overlay(canvas, g.tile_x(h), g.tile_y(l), g.tile, image, map.data(), G);
      const float top = *std::max_element(map.begin(), map.end());
      canvas.draw_text(g.tile_x(h), g.tile_y(l) + g.tile + 3, "max " + fixed(top, 3), kMuted);
    }
  }
  return canvas;
}

Canvas render_rollout(const Image8& image, const Tensor2& rollout, const std::string& title,
                      const std::string& note) {
  const int G = int(rollout.shape(0)), S = int(image.shape(1));
  const int side = display_side(S, 280);
  const int gap = 24;
  const int x1 = kMargin, x2 = kMargin + side + gap;
  const int width = std::max({x2 + side + kMargin, 2 * kMargin + text_width(title, 2),
                              x2 + text_width(note) + kMargin});
  const int label_y = kMargin + 2 * kTextLineHeight + 8;
  const int y = label_y + 2 * kTextLineHeight;
  const int bar_y = y + side + 12;
  const int height = bar_y + 16 + 2 * kTextLineHeight + kMargin;
  Canvas canvas(width, height);
  canvas.draw_text(kMargin, kMargin, title, kInk, 2);
  canvas.draw_text(x1, label_y, "input", kInk, 2);
  canvas.draw_text(x2, label_y, "attention rollout", kInk, 2);
  draw_image(canvas, x1, y, side, image);
  draw_overlay(canvas, x2, y, side, image, rollout.data(), G);

  const auto [lo, hi] = std::minmax_element(rollout.data(), rollout.data() + rollout.size());
  const std::string lo_text = fixed(*lo, 4), hi_text = fixed(*hi, 4);
  canvas.draw_text(x2, bar_y + 3, lo_text, kMuted);
  const int bar_x = x2 + text_width(lo_text) + 4;
  const int bar_w = std::max(40, side - 2 * (text_width(hi_text) + 4));
  draw_colorbar(canvas, bar_x, bar_y + 2, bar_w, 12);
  canvas.draw_text(bar_x + bar_w + 6, bar_y + 3, hi_text, kMuted);
  canvas.draw_text(x2, bar_y + 20, "share of the CLS output flowing from each patch", kMuted);
  canvas.draw_text(x2, bar_y + 20 + kTextLineHeight, note, kMuted);
  return canvas;
}

// ---------------------------------------------------------------------------------------
// HTML

static std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

static std::string text_of(const nlohmann::ordered_json& j) {
  return j.is_string() ? j.get<std::string>() : j.dump();
}

std::string render_index_html(const nlohmann::ordered_json& s) {
  const nlohmann::ordered_json& pred = s["prediction"];
  const std::string predicted = html_escape(text_of(pred["class"]));
  std::string h;
  h += "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<title>minivit attention: " + predicted + "</title>\n";
  h += "<style>\n"
       "body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; padding: 0 1em; color: #222; }\n"
       "img { image-rendering: pixelated; max-width: 100%; border: 1px solid #ddd; }\n"
       "table { border-collapse: collapse; margin: 0.5em 0 1em; }\n"
       "td, th { padding: 3px 10px; text-align: right; border-bottom: 1px solid #eee; }\n"
       "td:first-child, th:first-child { text-align: left; }\n"
       ".muted { color: #666; }\n"
       "</style>\n</head>\n<body>\n";
  h += "<h1>Predicted: " + predicted + " (" +
       fixed(100.0 * pred["probability"].get<double>(), 1) + "%)</h1>\n";
  const nlohmann::ordered_json& in = s["input"];
  std::string source;
  if (in.contains("file")) {
    source = "Image " + text_of(in["file"]);
    if (in.contains("file_size"))
      source += " (" + text_of(in["file_size"][0]) + "x" + text_of(in["file_size"][1]) + " pixels)";
  } else {
    source = text_of(in["split"]) + " split image " + text_of(in["index"]) + " of " + text_of(in["dataset"]) +
             ", labelled " + text_of(in["label"]);
  }
  source += "; checkpoint " + text_of(in["checkpoint"]) + ", step " + text_of(in["step"]) + ".";
  h += "<p class=\"muted\">" + html_escape(source) + "</p>\n";

  h += "<table>\n<tr><th>class</th><th>probability</th></tr>\n";
  for (const auto& c : pred["top5"])
    h += "<tr><td>" + html_escape(text_of(c["class"])) + "</td><td>" +
         fixed(100.0 * c["probability"].get<double>(), 2) + "%</td></tr>\n";
  h += "</table>\n";

  h += "<h2>Input</h2>\n<p>The image as the model saw it: converted to the model's channels and "
       "size, normalised, and shown denormalised.</p>\n<img src=\"input.png\" alt=\"input\">\n";
  const nlohmann::ordered_json& r = s["rollout"];
  h += "<h2>Attention rollout</h2>\n<p>Where the whole network looks: the heads of each layer "
       "fused by <b>" + text_of(r["fusion"]) + "</b>, " +
       (r["discard"].get<double>() > 0 ? "the lowest " + strprintf("%g", 100.0 * r["discard"].get<double>()) +
                                             "% of the entries outside the CLS column discarded"
                                       : std::string("nothing discarded")) +
       ", the identity added for the residual path, rows renormalised and "
       "the layers multiplied (Abnar &amp; Zuidema 2020). Shown: the CLS token's row over the "
       "patches.</p>\n<img src=\"rollout.png\" alt=\"attention rollout\">\n";
  h += "<h2>Attention per layer and head</h2>\n<p>Each tile shows where the CLS token of one "
       "layer (row) and head (column) looks among the patches; the colour of each tile is scaled "
       "to its own range, and its top patch is boxed in red.</p>\n"
       "<img src=\"grid.png\" alt=\"attention per layer and head\">\n";

  const int H = s["heads"].get<int>();
  h += "<h3>Entropy of the CLS attention over the patches</h3>\n<p class=\"muted\">In nats; " +
       fixed(s["entropy_uniform"].get<double>(), 2) +
       " is uniform attention, 0 is all attention on one patch.</p>\n<table>\n<tr><th></th>";
  for (int hd = 0; hd < H; ++hd) h += "<th>head " + std::to_string(hd) + "</th>";
  h += "</tr>\n";
  for (const auto& layer : s["attention"]) {
    h += "<tr><td>layer " + std::to_string(layer["layer"].get<int>()) + "</td>";
    for (const auto& head : layer["heads"]) h += "<td>" + fixed(head["entropy"].get<double>(), 2) + "</td>";
    h += "</tr>\n";
  }
  h += "</table>\n";

  h += "<h2>Files</h2>\n<ul>\n";
  for (const auto& [name, what] : s["files"].items())
    h += "<li><a href=\"" + name + "\">" + name + "</a>: " + html_escape(text_of(what)) + "</li>\n";
  h += "<li><a href=\"summary.json\">summary.json</a>: the prediction, per-head entropy and top "
       "patches, and the rollout's top patches</li>\n</ul>\n</body>\n</html>\n";
  return h;
}

}  // namespace minivit
