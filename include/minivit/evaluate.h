#pragma once
// Evaluation of a model on a set of images: top-1, top-5, mean cross-entropy (no label
// smoothing), per-class accuracy and the confusion matrix, in the layout `eval --json`
// writes.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "minivit/dataset.h"
#include "minivit/vit.h"

namespace minivit {

struct EvalResult {
  double top1 = 0.0;  // fraction in [0, 1]
  double top5 = 0.0;
  double loss = 0.0;
  int64_t n = 0;
  std::vector<double> per_class;                 // (K) accuracy of each true class
  std::vector<std::vector<int64_t>> confusion;   // (K, K) [true][predicted]
};

// Runs `model` in eval mode over data[indices] in batches of acts.max_batch.
EvalResult evaluate(const ViT& model, Activations& acts, const Dataset& data,
                    const std::vector<int64_t>& indices, const std::vector<float>& mean,
                    const std::vector<float>& std);

nlohmann::json eval_to_json(const EvalResult& result, const std::vector<std::string>& class_names);

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

// A human-readable report: headline figures, per-class accuracy, confusion matrix.
std::string format_eval_report(const EvalResult& result,
                               const std::vector<std::string>& class_names);

}  // namespace minivit
