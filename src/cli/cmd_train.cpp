// `minivit train`: the command line turned into a training run (see train/trainer.h for
// the loop and the run directory it writes).
#include <filesystem>
#include <utility>

#include "minivit/cli/commands.h"
#include "minivit/core/error.h"
#include "minivit/formats/config_file.h"
#include "minivit/train/trainer.h"

namespace minivit {

int run_train(const TrainOptions& opt) {
  const bool resuming = !opt.resume_dir.empty();
  std::string config_path = opt.config_path;
  if (config_path.empty()) {
    if (!resuming) throw Error("--config: a config file is required (e.g. configs/fashion_mnist.toml)");
    config_path = (std::filesystem::path(opt.resume_dir) / "config.toml").string();
  }
  TrainerOptions resolved;
  resolved.config = load_config(config_path, opt.sets);
  resolved.config.train.out_dir = !opt.out_dir.empty() ? opt.out_dir
                                  : resuming          ? opt.resume_dir
                                                      : resolved.config.train.out_dir;
  resolved.config_path = config_path;
  resolved.resume_dir = opt.resume_dir;
  resolved.init_path = opt.init_path;
  Trainer trainer(std::move(resolved));
  return trainer.run();
}

}  // namespace minivit
