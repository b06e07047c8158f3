// The table of config keys and the TOML text of their values.
#include "config_fields.h"

#include <toml++/toml.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "minivit/core/error.h"

namespace minivit::config_fields {

namespace {

constexpr std::string_view kDataFormats[] = {"idx", "cifar10", "cifar100", "folder"};
constexpr std::string_view kCifar100Labels[] = {"fine", "coarse"};
constexpr std::string_view kOptimizers[] = {"adamw", "sgd"};
constexpr std::string_view kLrSchedules[] = {"cosine", "constant"};
constexpr std::string_view kAttentionForms[] = {"scaled_dot", "dot", "additive", "cosine"};
constexpr std::string_view kPosEmbeds[] = {"learned", "sincos2d", "none"};
constexpr std::string_view kPools[] = {"cls", "mean"};
constexpr std::string_view kPatchEmbeds[] = {"linear", "shifted", "conv"};
constexpr std::string_view kPrecisions[] = {"fp32", "bf16"};

}  // namespace

std::span<const std::string_view> choice_words(DataFormat) { return kDataFormats; }
std::span<const std::string_view> choice_words(Cifar100Label) { return kCifar100Labels; }
std::span<const std::string_view> choice_words(OptimizerKind) { return kOptimizers; }
std::span<const std::string_view> choice_words(LrSchedule) { return kLrSchedules; }
std::span<const std::string_view> choice_words(AttentionForm) { return kAttentionForms; }
std::span<const std::string_view> choice_words(PosEmbedKind) { return kPosEmbeds; }
std::span<const std::string_view> choice_words(PoolKind) { return kPools; }
std::span<const std::string_view> choice_words(PatchEmbedKind) { return kPatchEmbeds; }
std::span<const std::string_view> choice_words(Precision) { return kPrecisions; }

std::vector<Field> fields_of(Config& c) {
  return {
      {"model", "image_size", &c.model.image_size},
      {"model", "channels", &c.model.channels},
      {"model", "patch_size", &c.model.patch_size},
      {"model", "dim", &c.model.dim},
      {"model", "depth", &c.model.depth},
      {"model", "heads", &c.model.heads},
      {"model", "mlp_dim", &c.model.mlp_dim},
      {"model", "dropout", &c.model.dropout},
      {"model", "attention_dropout", &c.model.attention_dropout},
      {"model", "drop_path", &c.model.drop_path},
      {"model", "patch_drop", &c.model.patch_drop},
      {"model", "num_classes", &c.model.num_classes},
      {"model", "attention", &c.model.attention},
      {"model", "pos_embed", &c.model.pos_embed},
      {"model", "pool", &c.model.pool},
      {"model", "patch_embed", &c.model.patch_embed},
      {"model", "stem_channels", &c.model.stem_channels},
      {"data", "format", &c.data.format},
      {"data", "path", &c.data.path},
      {"data", "mean", &c.data.mean},
      {"data", "std", &c.data.std},
      {"data", "shuffle", &c.data.shuffle},
      {"data", "augment", &c.data.augment},
      {"data", "val_fraction", &c.data.val_fraction},
      {"data", "class_names", &c.data.class_names},
      {"data", "label", &c.data.label},
      {"data", "resize", &c.data.resize},
      {"data", "crop_padding", &c.data.crop_padding},
      {"data", "hflip", &c.data.hflip},
      {"data", "erasing", &c.data.erasing},
      {"data", "mixup", &c.data.mixup},
      {"data", "cutmix", &c.data.cutmix},
      {"data", "mix_prob", &c.data.mix_prob},
      {"optim", "name", &c.optim.name},
      {"optim", "lr", &c.optim.lr},
      {"optim", "weight_decay", &c.optim.weight_decay},
      {"optim", "beta1", &c.optim.beta1},
      {"optim", "beta2", &c.optim.beta2},
      {"optim", "momentum", &c.optim.momentum},
      {"optim", "schedule", &c.optim.schedule},
      {"optim", "warmup_steps", &c.optim.warmup_steps},
      {"optim", "min_lr", &c.optim.min_lr},
      {"optim", "clip_grad_norm", &c.optim.clip_grad_norm},
      {"optim", "label_smoothing", &c.optim.label_smoothing},
      {"optim", "ema_decay", &c.optim.ema_decay},
      {"train", "epochs", &c.train.epochs},
      {"train", "max_steps", &c.train.max_steps},
      {"train", "batch_size", &c.train.batch_size},
      {"train", "seed", &c.train.seed},
      {"train", "threads", &c.train.threads},
      {"train", "out_dir", &c.train.out_dir},
      {"train", "log_every", &c.train.log_every},
      {"train", "eval_every", &c.train.eval_every},
      {"train", "unmasked_epochs", &c.train.unmasked_epochs},
      {"train", "precision", &c.train.precision},
  };
}

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error(where + ": " + what);
}

std::string format_float(float value) {
  char buffer[64];
  auto shortest = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, shortest.ptr);
  // toml++ reads floats as double; a shortest-float string could in rare cases round
  // differently through double than straight to float, so then write the exact double.
  if (std::isfinite(value) && static_cast<float>(std::strtod(text.c_str(), nullptr)) != value) {
    auto exact = std::to_chars(buffer, buffer + sizeof buffer, static_cast<double>(value));
    text.assign(buffer, exact.ptr);
  }
  // "1" would read back as a TOML integer; keep it visibly a float.
  if (text.find_first_of(".eEna") == std::string::npos) text += ".0";
  return text;
}

std::string format_string(const std::string& value) {
  // Basic "..." strings with escapes, on one line, as the flat form needs.
  std::ostringstream out;
  out << toml::toml_formatter{toml::value<std::string>(value),
                              toml::format_flags::allow_unicode_strings};
  return out.str();
}

std::string to_toml_text(int value) { return std::to_string(value); }
std::string to_toml_text(int64_t value) { return std::to_string(value); }
std::string to_toml_text(uint64_t value) { return std::to_string(value); }
std::string to_toml_text(float value) { return format_float(value); }
std::string to_toml_text(bool value) { return value ? "true" : "false"; }
std::string to_toml_text(const std::string& value) { return format_string(value); }

std::string to_toml_text(const Field& field) {
  return std::visit([](auto* target) { return to_toml_text(*target); }, field.target);
}

}  // namespace minivit::config_fields

namespace minivit {

namespace {

template <config_fields::IsChoice Choice>
std::string_view word_of(Choice value) {
  return config_fields::choice_words(value)[static_cast<size_t>(value)];
}

}  // namespace

std::string_view config_name(DataFormat format) { return word_of(format); }
std::string_view config_name(Cifar100Label label) { return word_of(label); }
std::string_view config_name(OptimizerKind optimizer) { return word_of(optimizer); }
std::string_view config_name(LrSchedule schedule) { return word_of(schedule); }
std::string_view config_name(AttentionForm form) { return word_of(form); }
std::string_view config_name(PosEmbedKind pos_embed) { return word_of(pos_embed); }
std::string_view config_name(PoolKind pool) { return word_of(pool); }
std::string_view config_name(PatchEmbedKind patch_embed) { return word_of(patch_embed); }
std::string_view config_name(Precision precision) { return word_of(precision); }

}  // namespace minivit
