// `minivit eval`: a checkpoint's accuracy on a split of the data it was trained on (or of
// another path in the same format), with per-class accuracy and the confusion matrix.
#include <cstdio>

#include "minivit/cli/commands.h"
#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/data/data.h"
#include "minivit/formats/checkpoint.h"
#include "minivit/kernels/threads.h"
#include "minivit/train/evaluate.h"
#include "minivit/train/splits.h"

namespace minivit {

int run_eval(const EvalOptions& opt) {
  Checkpoint ckpt = load_checkpoint(opt.checkpoint);
  Config& config = ckpt.config;
  if (!opt.data_path.empty()) config.data.path = opt.data_path;
  const Split split = parse_split(opt.split, "--split");
  set_num_threads(opt.threads >= 0 ? opt.threads : config.train.threads);

  DataSplits data = load_data(config.data, config.model);
  // The same carving as training used, so "val" is the split best.safetensors was chosen on.
  const SplitImages images = images_of_split(data, split, config);
  check_data_fits_model(images.dataset, config.model, config.data.path + " (" + opt.split + " split)");
  if (images.indices.empty())
    throw Error("--split val: the checkpoint was trained with data.val_fraction = 0, so there is no validation split");
  Activations acts(config.model, config.train.batch_size, ActivationsFor::evaluation);
  const EvalResult result =
      evaluate(*ckpt.model, acts, images.dataset, images.indices, config.data.mean, config.data.std);

  std::printf("%s on %s (%s split), step %lld:\n%s", opt.checkpoint.c_str(), config.data.path.c_str(),
              opt.split.c_str(), (long long)ckpt.progress.step,
              format_eval_report(result, ckpt.class_names).c_str());
  if (!opt.json_path.empty()) {
    nlohmann::json j = eval_to_json(result, ckpt.class_names);
    j["split"] = opt.split;
    j["checkpoint"] = opt.checkpoint;
    j["step"] = ckpt.progress.step;
    write_file_atomic(opt.json_path, j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace minivit
