#include "minivit/train/evaluate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "minivit/data/data.h"
#include "minivit/model/predict.h"
#include "minivit/nn/cross_entropy.h"

namespace minivit {

int eval_batch_size(int at_most) {
  return std::min(at_most, std::max(kEvalChunk, vit_batch_filling_threads()));
}

EvalResult evaluate(const ViT& model, Activations& acts, const Dataset& data,
                    const std::vector<int64_t>& indices, const std::vector<float>& mean,
                    const std::vector<float>& std) {
  const ModelConfig& c = model.config;
  const int K = c.num_classes;
  const int max_b = eval_batch_size(acts.max_batch);
  const int64_t image_len = int64_t(c.channels) * c.image_size * c.image_size;
  std::vector<float> images(size_t(max_b * image_len));
  std::vector<int32_t> labels(static_cast<size_t>(max_b));
  std::vector<float> targets(size_t(max_b) * K);
  EvalResult r;
  const ForwardWeightsHeld held(model, acts);  // the model does not change during the pass
  r.confusion.assign(size_t(K), std::vector<int64_t>(size_t(K), 0));
  int64_t correct1 = 0, correct5 = 0;
  double loss_sum = 0.0;
  const int64_t n = int64_t(indices.size());
  for (int64_t start = 0; start < n; start += max_b) {
    const int B = int(std::min<int64_t>(max_b, n - start));
    fill_batch(images.data(), labels.data(), data, indices.data() + start, B, mean, std);
    vit_forward(model, acts, images.data(), B, false, 0);
    make_targets(targets.data(), labels.data(), B, K, 0.0f);
    // Each image's loss alone, added in image order: the total does not depend on how
    // many images a pass takes (kEvalChunk, the thread count).
    for (int b = 0; b < B; ++b) {
      const int64_t row = int64_t(b) * K;
      loss_sum += double(cross_entropy_forward(acts.probs + row, acts.logits + row,
                                               targets.data() + row, 1, K));
    }
    for (int b = 0; b < B; ++b) {
      const float* z = acts.logits + int64_t(b) * K;
      const int label = labels[size_t(b)];
      const int predicted = int(std::max_element(z, z + K) - z);
      // Rank of the true class: how many classes score strictly higher.
      int higher = 0;
      for (int k = 0; k < K; ++k) higher += z[k] > z[label];
      correct1 += predicted == label;
      correct5 += higher < 5;
      r.confusion[size_t(label)][size_t(predicted)]++;
    }
  }
  r.n = n;
  r.top1 = n ? double(correct1) / n : 0.0;
  r.top5 = n ? double(correct5) / n : 0.0;
  r.loss = n ? loss_sum / n : 0.0;
  r.per_class.resize(size_t(K));
  for (int k = 0; k < K; ++k) {
    int64_t total = 0;
    for (int64_t v : r.confusion[size_t(k)]) total += v;
    r.per_class[size_t(k)] = total ? double(r.confusion[size_t(k)][size_t(k)]) / total : 0.0;
  }
  return r;
}

nlohmann::json eval_to_json(const EvalResult& r, const std::vector<std::string>& class_names) {
  nlohmann::json j;
  j["top1"] = r.top1;
  j["top5"] = r.top5;
  j["loss"] = r.loss;
  j["n"] = r.n;
  j["per_class"] = r.per_class;
  j["confusion"] = r.confusion;
  j["class_names"] = class_names;
  return j;
}

std::string format_eval_report(const EvalResult& r, const std::vector<std::string>& names) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "top-1 %.2f%%   top-5 %.2f%%   loss %.4f   n %lld\n",
                100 * r.top1, 100 * r.top5, r.loss, (long long)r.n);
  out += line;
  size_t width = 5;
  for (const auto& n : names) width = std::max(width, n.size());
  out += "\nper-class accuracy:\n";
  for (size_t k = 0; k < r.per_class.size(); ++k) {
    std::snprintf(line, sizeof line, "  %-*s %6.2f%%\n", int(width), names[k].c_str(),
                  100 * r.per_class[k]);
    out += line;
  }
  out += "\nconfusion matrix (rows: true class, columns: predicted class index):\n";
  std::snprintf(line, sizeof line, "  %-*s", int(width), "");
  out += line;
  for (size_t k = 0; k < r.confusion.size(); ++k) {
    std::snprintf(line, sizeof line, " %6zu", k);
    out += line;
  }
  out += "\n";
  for (size_t t = 0; t < r.confusion.size(); ++t) {
    std::snprintf(line, sizeof line, "  %-*s", int(width), (std::to_string(t) + " " + names[t]).substr(0, width).c_str());
    out += line;
    for (int64_t v : r.confusion[t]) {
      std::snprintf(line, sizeof line, " %6lld", (long long)v);
      out += line;
    }
    out += "\n";
  }
  return out;
}

}  // namespace minivit
