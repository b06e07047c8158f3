// `minivit predict`: class probabilities for image files, through the C API (minivit.h) that
// other programs use, after the same preprocessing as `attention --image` (image_io.h) and
// the same normalisation as training.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "minivit.h"
#include "minivit/api/handle.h"
#include "minivit/cli/commands.h"
#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/data/image_io.h"
#include "minivit/kernels/threads.h"
#include "minivit/model/predict.h"

namespace minivit {

namespace {

// The API's status as the CLI's exception: its message names the file and what is wrong.
void check(minivit_model* model, minivit_status status) {
  if (status != MINIVIT_OK) throw Error(minivit_last_error(model));
}

}  // namespace

int run_predict(const PredictOptions& opt) {
  if (opt.images.empty()) throw Error("no images: give one or more IMAGE files after the options");
  if (opt.topk < 1) throw Error("--topk " + std::to_string(opt.topk) + ": expected 1 or more");
  const std::unique_ptr<minivit_model, decltype(&minivit_free)> model(minivit_create(),
                                                                      &minivit_free);
  if (!model) throw Error("out of memory");
  check(model.get(), minivit_load_file(model.get(), opt.checkpoint.c_str()));
  minivit_description d;
  check(model.get(), minivit_describe(model.get(), &d));
  const std::vector<float> mean(d.mean, d.mean + d.channels), std(d.std, d.std + d.channels);
  const int threads = set_num_threads(opt.threads >= 0 ? opt.threads
                                                     : loaded_config(model.get()).train.threads);
  check(model.get(), minivit_set_threads(model.get(), threads));

  // Every file is read before any is classified, so a bad one fails the command before it
  // prints a partial answer.
  const size_t image_len = size_t(d.channels) * size_t(d.image_size) * size_t(d.image_size);
  std::vector<float> inputs;
  inputs.reserve(opt.images.size() * image_len);
  for (const std::string& path : opt.images) {
    const LoadedImage img = load_image_file(path, d.channels, d.image_size);
    const std::vector<float> x = normalise_image(img.pixels, mean, std);
    inputs.insert(inputs.end(), x.begin(), x.end());
  }
  const int n = int(opt.images.size()), K = d.classes;
  std::vector<float> probs(size_t(n) * size_t(K));
  check(model.get(), minivit_predict(model.get(), inputs.data(), n, probs.data()));

  const int k = std::min(opt.topk, K);
  nlohmann::json predictions = nlohmann::json::array();
  for (int i = 0; i < n; ++i) {
    const std::vector<double> p(probs.begin() + size_t(i) * K, probs.begin() + size_t(i + 1) * K);
    const std::string& image = opt.images[size_t(i)];
    std::printf("%s%s\n", i ? "\n" : "", image.c_str());
    nlohmann::json top = nlohmann::json::array();
    for (const ClassScore& s : top_classes(p, k)) {
      const char* name = nullptr;
      check(model.get(), minivit_class_name(model.get(), s.index, &name));
      std::printf("  %.4f  %s\n", s.probability, name);
      top.push_back({{"class", name}, {"index", s.index}, {"probability", s.probability}});
    }
    predictions.push_back({{"image", image}, {"top", std::move(top)}});
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
