// `minivit info`: what a checkpoint holds. For a minivit checkpoint: the resolved config,
// parameter count, step, epoch and accuracy; for any other safetensors file: its tensors.
#include <cstdio>

#include "minivit/cli/commands.h"
#include "minivit/formats/checkpoint.h"
#include "minivit/formats/config_file.h"
#include "minivit/formats/safetensors.h"

namespace minivit {

int run_info(const std::string& path) {
  SafetensorsFile file = read_safetensors(path);
  int64_t values = 0;
  for (const auto& [name, t] : file.tensors) values += int64_t(t.data.size());
  if (!file.metadata.count("minivit.format_version")) {
    std::printf("%s: safetensors file with %zu tensors, %lld values (no minivit metadata)\n",
                path.c_str(), file.tensors.size(), (long long)values);
    for (const auto& name : file.order)
      std::printf("  %-40s %s\n", name.c_str(), shape_text(file.tensors[name].shape).c_str());
    return 0;
  }
  Checkpoint ckpt = load_checkpoint(path);
  const TrainingProgress& p = ckpt.progress;
  std::printf("%s: minivit checkpoint (format %s, checksum %s)\n", path.c_str(),
              ckpt.metadata["minivit.format_version"].c_str(),
              ckpt.metadata.count("minivit.checksum") ? "verified" : "absent");
  std::printf("parameters: %lld in %zu tensors\n", (long long)ckpt.model->num_params,
              ckpt.model->specs.size());
  std::printf("step %lld, epoch %lld\n", (long long)p.step, (long long)p.epoch);
  if (p.val_top1 >= 0) std::printf("validation top-1: %.2f%%\n", 100 * p.val_top1);
  if (p.best_val_top1 >= 0)
    std::printf("best validation top-1: %.2f%% (step %lld)\n", 100 * p.best_val_top1, (long long)p.best_step);
  std::printf("classes (%zu):", ckpt.class_names.size());
  for (const auto& n : ckpt.class_names) std::printf(" %s;", n.c_str());
  std::printf("\n\nconfig:\n%s", config_to_toml(ckpt.config).c_str());
  return 0;
}

}  // namespace minivit
