#pragma once
// What a model's logits say about one image: class probabilities and the most probable
// classes, for predict, attention and evaluation reports.
#include <vector>

namespace minivit {

// Softmax of one image's logits (K), in double so that probabilities of a confident model
// still sum to 1 when printed.
std::vector<double> class_probabilities(const float* logits, int K);

struct ClassScore {
  int index = 0;
  double probability = 0.0;
};
// The k most probable classes, most probable first (ties: lower index first); k is capped
// at the number of classes.
std::vector<ClassScore> top_classes(const std::vector<double>& probs, int k);

}  // namespace minivit
