#pragma once
// Evaluation of a model on a set of images: top-1, top-5, mean cross-entropy (no label
// smoothing), per-class accuracy and the confusion matrix, in the layout `eval --json`
// writes.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "minivit/data/dataset.h"
#include "minivit/model/vit.h"

namespace minivit {

struct EvalResult {
  double top1 = 0.0;  // fraction in [0, 1]
  double top5 = 0.0;
  double loss = 0.0;
  int64_t n = 0;
  std::vector<double> per_class;                 // (K) accuracy of each true class
  std::vector<std::vector<int64_t>> confusion;   // (K, K) [true][predicted]
};

// Evaluation forwards this many images at a time, whatever the training batch. With the
// blocks sharing one set of buffers (ActivationsFor::evaluation), 128 evaluated the 60,000
// training images 2-3% faster than 64 on a 2-core Zen 4 and as fast as 256, the default and
// the 6-block CLS models alike. Results do not depend on it: every row is computed on its own,
// and the loss is summed image by image.
constexpr int kEvalChunk = 128;

// Images evaluation forwards at a time: kEvalChunk, or as many as keep every thread busy
// where that is more (vit_batch_filling_threads: 8 images a thread), at most `at_most` (the
// activations' batch, or the images there are).
int eval_batch_size(int at_most);

// Runs `model` in eval mode over data[indices], eval_batch_size(acts.max_batch) at a time.
EvalResult evaluate(const ViT& model, Activations& acts, const Dataset& data,
                    const std::vector<int64_t>& indices, const std::vector<float>& mean,
                    const std::vector<float>& std);

nlohmann::json eval_to_json(const EvalResult& result, const std::vector<std::string>& class_names);

// A human-readable report: headline figures, per-class accuracy, confusion matrix.
std::string format_eval_report(const EvalResult& result,
                               const std::vector<std::string>& class_names);

}  // namespace minivit
