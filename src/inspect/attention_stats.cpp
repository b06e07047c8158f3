#include "minivit/inspect/attention_stats.h"

#include <cmath>

#include "minivit/inspect/plot.h"

namespace minivit {

AttentionStats::AttentionStats(const ModelConfig& c)
    : layers(c.depth),
      heads(c.heads),
      grid(c.grid()),
      tokens(c.tokens()),
      pool(c.pool),
      distance_sum(size_t(c.depth) * c.heads, 0.0),
      entropy_sum(size_t(c.depth) * c.heads, 0.0) {}

void AttentionStats::add_layer(int layer, const float* att) {
  const int T = tokens, G = grid, first = pool == PoolKind::cls ? 1 : 0;
  for (int h = 0; h < heads; ++h) {
    const float* rows = att + int64_t(h) * T * T;
    double distance = 0.0, entropy = 0.0;
    for (int i = 0; i < T; ++i) {
      const float* row = rows + int64_t(i) * T;
      for (int j = 0; j < T; ++j)
        if (row[j] > 0.0f) entropy -= double(row[j]) * std::log(double(row[j]));
      if (i < first) continue;  // the CLS token has no place on the grid
      const int qi = (i - first) / G, qj = (i - first) % G;
      double weighted = 0.0, mass = 0.0;
      for (int j = first; j < T; ++j) {
        const int ki = (j - first) / G, kj = (j - first) % G;
        weighted += double(row[j]) * std::hypot(double(qi - ki), double(qj - kj));
        mass += row[j];
      }
      if (mass > 0.0) distance += weighted / mass;
    }
    distance_sum[size_t(layer) * heads + h] += distance / double(T - first);
    entropy_sum[size_t(layer) * heads + h] += entropy / double(T);
  }
}

double AttentionStats::distance(int layer, int head) const {
  return images ? distance_sum[size_t(layer) * heads + head] / double(images) : 0.0;
}

double AttentionStats::entropy(int layer, int head) const {
  return images ? entropy_sum[size_t(layer) * heads + head] / double(images) : 0.0;
}

nlohmann::ordered_json attention_stats_json(const AttentionStats& s, const std::string& source) {
  nlohmann::ordered_json j;
  j["source"] = source;
  j["images"] = s.images;
  j["layers"] = s.layers;
  j["heads"] = s.heads;
  j["grid"] = s.grid;
  j["definitions"] = {
      {"distance",
       "mean attention distance in patches: per patch query, the grid distance to each patch "
       "key weighted by the attention renormalised over the patches (CLS left out), averaged "
       "over queries and images"},
      {"entropy",
       "mean entropy in nats of every token's attention row over all keys, averaged over "
       "tokens and images; uniform attention is ln(tokens)"}};
  j["uniform_entropy"] = std::log(double(s.tokens));
  nlohmann::ordered_json per_layer = nlohmann::ordered_json::array();
  for (int l = 0; l < s.layers; ++l) {
    nlohmann::ordered_json distance = nlohmann::ordered_json::array(), entropy = distance;
    for (int h = 0; h < s.heads; ++h) {
      distance.push_back(s.distance(l, h));
      entropy.push_back(s.entropy(l, h));
    }
    per_layer.push_back({{"layer", l}, {"distance", distance}, {"entropy", entropy}});
  }
  j["per_layer"] = per_layer;
  return j;
}

Canvas render_attention_stats(const AttentionStats& s) {
  PlotSeries heads_d{"heads", kPlotBlue, false, false, {}}, mean_d{"mean", kPlotOrange, true, true, {}};
  PlotSeries heads_e = heads_d, mean_e = mean_d;
  for (int l = 0; l < s.layers; ++l) {
    double d = 0.0, e = 0.0;
    for (int h = 0; h < s.heads; ++h) {
      heads_d.xy.emplace_back(l + 1, s.distance(l, h));
      heads_e.xy.emplace_back(l + 1, s.entropy(l, h));
      d += s.distance(l, h) / s.heads;
      e += s.entropy(l, h) / s.heads;
    }
    mean_d.xy.emplace_back(l + 1, d);
    mean_e.xy.emplace_back(l + 1, e);
  }
  return render_panels({{"distance, patches", "layer", 0, INFINITY, {heads_d, mean_d}},
                        {"entropy, nats", "layer", 0, INFINITY, {heads_e, mean_e}}},
                       900, 400);
}

}  // namespace minivit
