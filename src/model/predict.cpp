#include "minivit/model/predict.h"

#include <algorithm>
#include <cmath>

namespace minivit {

std::vector<double> class_probabilities(const float* logits, int K) {
  const double top = *std::max_element(logits, logits + K);
  std::vector<double> p(static_cast<size_t>(K));
  double sum = 0.0;
  for (int k = 0; k < K; ++k) sum += p[size_t(k)] = std::exp(double(logits[k]) - top);
  for (double& v : p) v /= sum;
  return p;
}

std::vector<ClassScore> top_classes(const std::vector<double>& probs, int k) {
  std::vector<ClassScore> all;
  for (size_t i = 0; i < probs.size(); ++i) all.push_back({int(i), probs[i]});
  std::stable_sort(all.begin(), all.end(), [](const ClassScore& a, const ClassScore& b) {
    return a.probability > b.probability;
  });
  all.resize(std::min(all.size(), size_t(std::max(k, 0))));
  return all;
}

}  // namespace minivit
