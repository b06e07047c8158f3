#include "minivit/formats/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "minivit/core/error.h"
#include "minivit/formats/config_file.h"

namespace minivit {

static std::vector<TensorRef> weight_refs(const ViT& model) {
  std::vector<TensorRef> refs;
  for (const ParamSpec& s : model.specs)
    refs.push_back({s.name, s.shape, model.weights.data() + s.offset});
  return refs;
}

static std::string format_double(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

static void put_progress(std::map<std::string, std::string>& meta, const TrainingProgress& p) {
  meta["minivit.step"] = std::to_string(p.step);
  meta["minivit.epoch"] = std::to_string(p.epoch);
  meta["minivit.val_top1"] = format_double(p.val_top1);
  meta["minivit.best_val_top1"] = format_double(p.best_val_top1);
  meta["minivit.best_step"] = std::to_string(p.best_step);
  meta["minivit.epoch_loss_sum"] = format_double(p.epoch_loss_sum);
  meta["minivit.epoch_correct"] = std::to_string(p.epoch_correct);
  meta["minivit.epoch_seen"] = std::to_string(p.epoch_seen);
}

static std::map<std::string, std::string> config_metadata(const Config& config) {
  std::map<std::string, std::string> meta;
  meta["minivit.format_version"] = std::to_string(kCheckpointFormatVersion);
  for (const auto& [key, value] : config_to_flat(config)) meta["minivit." + key] = value;
  return meta;
}

void save_checkpoint(const std::string& path, const ViT& model, const Config& config,
                     const std::vector<std::string>& class_names,
                     const TrainingProgress& progress) {
  auto meta = config_metadata(config);
  meta["minivit.class_names"] = nlohmann::json(class_names).dump();
  meta["minivit.num_params"] = std::to_string(model.num_params);
  put_progress(meta, progress);
  write_safetensors(path, weight_refs(model), meta);
}

static const std::string& require(const std::map<std::string, std::string>& meta,
                                  const std::string& key, const std::string& path) {
  auto it = meta.find(key);
  if (it == meta.end())
    throw Error(path + ": metadata has no '" + key +
                "'; not a minivit checkpoint (weights from elsewhere load with train --init)");
  return it->second;
}

static int64_t parse_int(const std::string& text, const std::string& key,
                         const std::string& path) {
  try {
    size_t used = 0;
    const int64_t v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw Error(path + ": metadata '" + key + "' = '" + text + "' is not an integer");
}

static double parse_double(const std::string& text, const std::string& key,
                           const std::string& path) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw Error(path + ": metadata '" + key + "' = '" + text + "' is not a number");
}

static TrainingProgress get_progress(const std::map<std::string, std::string>& meta,
                                     const std::string& path) {
  TrainingProgress p;
  p.step = parse_int(require(meta, "minivit.step", path), "minivit.step", path);
  p.epoch = parse_int(require(meta, "minivit.epoch", path), "minivit.epoch", path);
  auto optional_double = [&](const char* key, double fallback) {
    auto it = meta.find(key);
    return it == meta.end() ? fallback : parse_double(it->second, key, path);
  };
  // Written as integers; read as such, as a double such as 1e300 has no int64 value.
  auto optional_int = [&](const char* key, int64_t fallback) {
    auto it = meta.find(key);
    return it == meta.end() ? fallback : parse_int(it->second, key, path);
  };
  p.val_top1 = optional_double("minivit.val_top1", -1.0);
  p.best_val_top1 = optional_double("minivit.best_val_top1", -1.0);
  p.best_step = optional_int("minivit.best_step", -1);
  p.epoch_loss_sum = optional_double("minivit.epoch_loss_sum", 0.0);
  p.epoch_correct = optional_int("minivit.epoch_correct", 0);
  p.epoch_seen = optional_int("minivit.epoch_seen", 0);
  return p;
}

static Config get_config(const std::map<std::string, std::string>& meta,
                         const std::string& path) {
  const std::string& version = require(meta, "minivit.format_version", path);
  if (parse_int(version, "minivit.format_version", path) > kCheckpointFormatVersion)
    throw Error(path + ": checkpoint format version " + version +
                " is newer than this minivit understands (" +
                std::to_string(kCheckpointFormatVersion) + ")");
  std::vector<std::pair<std::string, std::string>> flat;
  for (const auto& [key, value] : meta) {
    static const char* sections[] = {"minivit.model.", "minivit.data.", "minivit.optim.",
                                     "minivit.train."};
    for (const char* prefix : sections)
      if (key.rfind(prefix, 0) == 0) flat.emplace_back(key.substr(8), value);
  }
  return config_from_flat(flat, path);
}

// The metadata's config decides how much memory the model takes: a corrupt 4 KB file could
// otherwise have gigabytes allocated before its tensors are found missing. So the file must
// hold at least the model's parameter count in numbers.
static void check_model_fits_file(const ModelConfig& m, const SafetensorsFile& file,
                                  const std::string& path) {
  double held = 0;
  for (const auto& [name, tensor] : file.tensors) held += double(tensor.data.size());
  const double needed = vit_param_count(m);
  if (needed > held) {
    char count[32];
    std::snprintf(count, sizeof count, "%.0f", needed);
    throw Error(path + ": the model in the metadata (model.dim = " + std::to_string(m.dim) +
                ", model.depth = " + std::to_string(m.depth) + ", model.image_size = " +
                std::to_string(m.image_size) + ", ...) has " + count +
                " parameters, but the file holds only " + std::to_string(uint64_t(held)) +
                " numbers");
  }
}

void load_weights(ViT& model, const SafetensorsFile& file, const std::string& path) {
  for (const ParamSpec& s : model.specs) {
    auto it = file.tensors.find(s.name);
    if (it == file.tensors.end())
      throw Error(path + ": tensor '" + s.name + "' is missing (the model needs " +
                  std::to_string(model.specs.size()) + " tensors named as timm names them)");
    if (it->second.shape != s.shape) {
      auto show = [](const std::vector<int64_t>& shape) {
        std::string out = "[";
        for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
        return out + "]";
      };
      throw Error(path + ": tensor '" + s.name + "' has shape " + show(it->second.shape) +
                  ", the model expects " + show(s.shape));
    }
    std::copy(it->second.data.begin(), it->second.data.end(), model.weights.data() + s.offset);
  }
  for (const auto& name : file.order)
    if (!model.find(name))
      throw Error(path + ": tensor '" + name + "' is not part of this model");
}

Checkpoint load_checkpoint(const std::string& path) {
  return checkpoint_from_safetensors(read_safetensors(path), path);
}

Checkpoint checkpoint_from_safetensors(SafetensorsFile file, const std::string& path) {
  Checkpoint ckpt;
  ckpt.config = get_config(file.metadata, path);
  ckpt.progress = get_progress(file.metadata, path);
  try {
    ckpt.class_names =
        nlohmann::json::parse(require(file.metadata, "minivit.class_names", path))
            .get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception&) {
    throw Error(path + ": metadata 'minivit.class_names' is not a JSON list of strings");
  }
  if (int(ckpt.class_names.size()) != ckpt.config.model.num_classes)
    throw Error(path + ": metadata lists " + std::to_string(ckpt.class_names.size()) +
                " class names for model.num_classes = " +
                std::to_string(ckpt.config.model.num_classes));
  check_model_fits_file(ckpt.config.model, file, path);
  ckpt.model = std::make_unique<ViT>(ckpt.config.model);
  load_weights(*ckpt.model, file, path);
  ckpt.metadata = std::move(file.metadata);
  return ckpt;
}

void save_resume_state(const std::string& path, const ViT& model, const Optimizer& optimizer,
                       const Config& config, const TrainingProgress& progress) {
  auto meta = config_metadata(config);
  put_progress(meta, progress);
  meta["minivit.optimizer_steps"] = std::to_string(optimizer.steps_taken);
  std::vector<TensorRef> refs = weight_refs(model);
  const std::vector<int64_t> flat = {model.num_params};
  refs.push_back({"optimizer.m", flat, optimizer.m.data()});
  refs.push_back({"optimizer.v", flat, optimizer.v.data()});
  if (optimizer.average_updates > 0) {
    meta["minivit.average_updates"] = std::to_string(optimizer.average_updates);
    refs.push_back({"optimizer.average", flat, optimizer.average.data()});
  }
  write_safetensors(path, refs, meta);
}

TrainingProgress load_resume_state(const std::string& path, ViT& model, Optimizer& optimizer,
                                   Config* saved_config) {
  SafetensorsFile file = read_safetensors(path);
  const Config saved = get_config(file.metadata, path);
  const ModelConfig &a = saved.model, &b = model.config;
  const std::pair<const char*, std::pair<int, int>> architecture[] = {
      {"model.image_size", {a.image_size, b.image_size}}, {"model.channels", {a.channels, b.channels}},
      {"model.patch_size", {a.patch_size, b.patch_size}}, {"model.dim", {a.dim, b.dim}},
      {"model.depth", {a.depth, b.depth}},                {"model.heads", {a.heads, b.heads}},
      {"model.mlp_dim", {a.mlp_dim, b.mlp_dim}},          {"model.num_classes", {a.num_classes, b.num_classes}},
      // Only a conv stem has channels to differ in.
      {"model.stem_channels", {a.stem_channels, b.patch_embed == PatchEmbedKind::conv &&
                                                        a.patch_embed == PatchEmbedKind::conv
                                                    ? b.stem_channels
                                                    : a.stem_channels}}};
  for (const auto& [key, values] : architecture)
    if (values.first != values.second)
      throw Error(path + ": the resume state was written for " + key + " = " +
                  std::to_string(values.first) + ", but the config asks for " +
                  std::to_string(values.second));
  const std::pair<const char*, std::pair<std::string_view, std::string_view>> forms[] = {
      {"model.attention", {config_name(a.attention), config_name(b.attention)}},
      {"model.pos_embed", {config_name(a.pos_embed), config_name(b.pos_embed)}},
      {"model.pool", {config_name(a.pool), config_name(b.pool)}},
      {"model.patch_embed", {config_name(a.patch_embed), config_name(b.patch_embed)}}};
  for (const auto& [key, words] : forms)
    if (words.first != words.second)
      throw Error(path + ": the resume state was written for " + key + " = \"" +
                  std::string(words.first) + "\", but the config asks for \"" +
                  std::string(words.second) + "\"");
  if (saved_config) *saved_config = saved;
  for (const char* name : {"optimizer.m", "optimizer.v"}) {
    auto it = file.tensors.find(name);
    if (it == file.tensors.end() || it->second.data.size() != size_t(model.num_params))
      throw Error(path + ": tensor '" + name + "' is missing or has the wrong size");
    float* dst = std::string(name) == "optimizer.m" ? optimizer.m.data() : optimizer.v.data();
    std::copy(it->second.data.begin(), it->second.data.end(), dst);
    file.tensors.erase(it);
  }
  // The weights' average, when the run kept one; a run that did not, resumed with
  // optim.ema_decay set, starts its average at the next step.
  if (auto it = file.tensors.find("optimizer.average"); it != file.tensors.end()) {
    if (it->second.data.size() != size_t(model.num_params))
      throw Error(path + ": tensor 'optimizer.average' has the wrong size");
    if (optimizer.config.ema_decay > 0.0f) {
      std::copy(it->second.data.begin(), it->second.data.end(), optimizer.average.data());
      optimizer.average_updates = parse_int(require(file.metadata, "minivit.average_updates", path),
                                            "minivit.average_updates", path);
    }
    file.tensors.erase(it);
  }
  file.order.erase(std::remove_if(file.order.begin(), file.order.end(),
                                  [](const std::string& n) { return n.rfind("optimizer.", 0) == 0; }),
                   file.order.end());
  load_weights(model, file, path);
  optimizer.steps_taken = parse_int(require(file.metadata, "minivit.optimizer_steps", path),
                                    "minivit.optimizer_steps", path);
  return get_progress(file.metadata, path);
}

}  // namespace minivit
