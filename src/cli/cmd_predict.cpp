// `minivit predict`: class probabilities for image files, through the same preprocessing
// as `attention --image` (image_io.h) and the same normalisation as training.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "minivit/cli/commands.h"
#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/data/dataset.h"
#include "minivit/data/image_io.h"
#include "minivit/formats/checkpoint.h"
#include "minivit/kernels/threads.h"
#include "minivit/model/predict.h"
#include "minivit/train/evaluate.h"

namespace minivit {

int run_predict(const PredictOptions& opt) {
  if (opt.images.empty()) throw Error("no images: give one or more IMAGE files after the options");
  if (opt.topk < 1) throw Error("--topk " + std::to_string(opt.topk) + ": expected 1 or more");
  Checkpoint ckpt = load_checkpoint(opt.checkpoint);
  const Config& config = ckpt.config;
  const ModelConfig& m = config.model;
  set_num_threads(opt.threads >= 0 ? opt.threads : config.train.threads);

  // Every file is read before any is classified, so a bad one fails the command before it
  // prints a partial answer.
  const size_t image_len = size_t(m.channels) * size_t(m.image_size) * size_t(m.image_size);
  std::vector<float> inputs;
  inputs.reserve(opt.images.size() * image_len);
  for (const std::string& path : opt.images) {
    const LoadedImage img = load_image_file(path, m.channels, m.image_size);
    const std::vector<float> x = normalise_image(img.pixels, config.data.mean, config.data.std);
    inputs.insert(inputs.end(), x.begin(), x.end());
  }

  const int n = int(opt.images.size());
  const int max_batch = eval_batch_size(n);
  Activations acts(m, max_batch, false);
  const int k = std::min(opt.topk, m.num_classes);
  const std::vector<std::string> class_names = class_names_for(ckpt.class_names, m.num_classes);
  nlohmann::json predictions = nlohmann::json::array();
  for (int start = 0; start < n; start += max_batch) {
    const int B = std::min(max_batch, n - start);
    vit_forward(*ckpt.model, acts, inputs.data() + size_t(start) * image_len, B, false, 0);
    for (int b = 0; b < B; ++b) {
      const std::vector<double> probs =
          class_probabilities(acts.logits + size_t(b) * size_t(m.num_classes), m.num_classes);
      const std::string& image = opt.images[size_t(start + b)];
      std::printf("%s%s\n", start + b ? "\n" : "", image.c_str());
      nlohmann::json top = nlohmann::json::array();
      for (const ClassScore& s : top_classes(probs, k)) {
        const std::string& name = class_names[size_t(s.index)];
        std::printf("  %.4f  %s\n", s.probability, name.c_str());
        top.push_back({{"class", name}, {"index", s.index}, {"probability", s.probability}});
      }
      predictions.push_back({{"image", image}, {"top", std::move(top)}});
    }
  }
  if (!opt.json_path.empty()) {
    const nlohmann::json report = {{"checkpoint", opt.checkpoint}, {"predictions", std::move(predictions)}};
    // A file name need not be UTF-8; JSON must be, so stray bytes become U+FFFD.
    write_file_atomic(opt.json_path,
                      report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  return 0;
}

}  // namespace minivit
