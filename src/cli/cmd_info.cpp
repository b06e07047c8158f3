// `minivit info`: what a checkpoint holds. For a minivit checkpoint: the model's form, the
// resolved config, parameter count, step, epoch and accuracy; for any other safetensors
// file: its tensors.
#include <cstdio>
#include <utility>

#include "minivit/cli/commands.h"
#include "minivit/core/progress.h"
#include "minivit/formats/checkpoint.h"
#include "minivit/formats/config_file.h"
#include "minivit/formats/safetensors.h"

namespace minivit {

// The model in one line: its sizes, attention form, position embedding and pooling, and the
// tokens they make.
static std::string model_form(const ModelConfig& m) {
  const std::string tokens =
      m.has_cls_token() ? strprintf("%d tokens: CLS + %d patches", m.tokens(), m.patches())
                        : strprintf("%d tokens: the patches, no CLS token", m.tokens());
  const char* positions = m.pos_embed == PosEmbedKind::sincos2d ? " (fixed, not trained)" : "";
  const char* head = m.pool == PoolKind::cls    ? "the head reads the CLS token"
                     : m.pool == PoolKind::mean ? "the head reads the mean of the tokens"
                                                : "the head reads the tokens weighted by "
                                                  "learned scores (sequence pooling)";
  std::string embedding;
  if (m.patch_embed == PatchEmbedKind::shifted)
    embedding = " with their 4 diagonal shifts by half a patch";
  if (m.patch_embed == PatchEmbedKind::conv) {
    embedding = strprintf(" through a conv stem of %d stride-2 3x3 convolutions (", m.stem_stages());
    for (int s = 0; s < m.stem_stages(); ++s)
      embedding += strprintf("%s%d", s ? ", " : "", m.stem_out(s));
    embedding += " channels)";
  }
  return strprintf("model: ViT, %dx%d patches of %dx%d pixels%s, dim %d, depth %d, heads %d, "
                   "mlp_dim %d; attention %s, pos_embed %s%s, pool %s (%s; %s)",
                   m.grid(), m.grid(), m.patch_size, m.patch_size, embedding.c_str(), m.dim,
                   m.depth, m.heads,
                   m.mlp_dim, std::string(config_name(m.attention)).c_str(),
                   std::string(config_name(m.pos_embed)).c_str(), positions,
                   std::string(config_name(m.pool)).c_str(), tokens.c_str(), head);
}

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
  // From the bytes already read: the input may be a stream that can be read only once.
  Checkpoint ckpt = checkpoint_from_safetensors(std::move(file), path);
  const TrainingProgress& p = ckpt.progress;
  std::printf("%s: minivit checkpoint (format %s, checksum %s)\n", path.c_str(),
              ckpt.metadata["minivit.format_version"].c_str(),
              ckpt.metadata.count("minivit.checksum") ? "verified" : "absent");
  std::printf("%s\n", model_form(ckpt.config.model).c_str());
  int64_t fixed = 0;
  for (const ParamSpec& s : ckpt.model->specs) fixed += s.trainable ? 0 : s.size;
  const std::string fixed_note =
      fixed ? strprintf(" (%lld of them fixed, never trained)", (long long)fixed) : std::string();
  std::printf("parameters: %lld in %zu tensors%s\n", (long long)ckpt.model->num_params,
              ckpt.model->specs.size(), fixed_note.c_str());
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
