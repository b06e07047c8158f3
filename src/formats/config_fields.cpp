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
constexpr std::string_view kAutoAugments[] = {"none", "trivial"};
constexpr std::string_view kOptimizers[] = {"adamw", "sgd"};
constexpr std::string_view kLrSchedules[] = {"cosine", "constant"};
constexpr std::string_view kAttentionForms[] = {"scaled_dot", "dot", "additive", "cosine", "lsa"};
constexpr std::string_view kPosEmbeds[] = {"learned", "sincos2d", "none"};
constexpr std::string_view kPools[] = {"cls", "mean", "seq"};
constexpr std::string_view kPatchEmbeds[] = {"linear", "shifted", "conv"};
constexpr std::string_view kPrecisions[] = {"fp32", "bf16"};

}  // namespace

std::span<const std::string_view> choice_words(DataFormat) { return kDataFormats; }
std::span<const std::string_view> choice_words(Cifar100Label) { return kCifar100Labels; }
std::span<const std::string_view> choice_words(AutoAugment) { return kAutoAugments; }
std::span<const std::string_view> choice_words(OptimizerKind) { return kOptimizers; }
std::span<const std::string_view> choice_words(LrSchedule) { return kLrSchedules; }
std::span<const std::string_view> choice_words(AttentionForm) { return kAttentionForms; }
std::span<const std::string_view> choice_words(PosEmbedKind) { return kPosEmbeds; }
std::span<const std::string_view> choice_words(PoolKind) { return kPools; }
std::span<const std::string_view> choice_words(PatchEmbedKind) { return kPatchEmbeds; }
std::span<const std::string_view> choice_words(Precision) { return kPrecisions; }

std::vector<Field> fields_of(Config& c) {
  return {
      {"model", "image_size", &c.model.image_size,
       "side of the square input image, in pixels"},
      {"model", "channels", &c.model.channels,
       "image channels: 1 grey, 3 RGB"},
      {"model", "patch_size", &c.model.patch_size,
       "side of a square patch, in pixels; must divide model.image_size"},
      {"model", "dim", &c.model.dim,
       "width of every token (embedding dimension); a multiple of model.heads"},
      {"model", "depth", &c.model.depth,
       "number of transformer blocks"},
      {"model", "heads", &c.model.heads,
       "attention heads per block; each sees model.dim / model.heads channels"},
      {"model", "mlp_dim", &c.model.mlp_dim,
       "hidden width of each block's MLP"},
      {"model", "dropout", &c.model.dropout,
       "dropout rate on the attention projection and both MLP outputs, in [0, 1)"},
      {"model", "attention_dropout", &c.model.attention_dropout,
       "dropout rate on the softmax attention weights, in [0, 1)"},
      {"model", "drop_path", &c.model.drop_path,
       "stochastic depth: the last block's rate of dropping a residual branch, in [0, 1)"},
      {"model", "patch_drop", &c.model.patch_drop,
       "patch dropout: the share of patches each training image drops, in [0, 1)"},
      {"model", "num_classes", &c.model.num_classes,
       "number of classes, at least 2"},
      {"model", "attention", &c.model.attention,
       "score function of every attention layer"},
      {"model", "pos_embed", &c.model.pos_embed,
       "position embedding: a trained table, a fixed 2-D sine-cosine one, or none"},
      {"model", "pool", &c.model.pool,
       "what the head reads: a CLS token, the mean of the patch tokens, or their weighted sum "
       "by learned scores (sequence pooling)"},
      {"model", "patch_embed", &c.model.patch_embed,
       "what the patch embedding projects: patches, shifted patches, or a conv stem's output"},
      {"model", "stem_channels", &c.model.stem_channels,
       "channels of the conv stem's first convolution, doubled by each later one"},
      {"data", "format", &c.data.format,
       "dataset layout read from data.path"},
      {"data", "path", &c.data.path,
       "directory holding the dataset's files"},
      {"data", "mean", &c.data.mean,
       "per-channel mean subtracted from pixels in [0, 1], one value per channel"},
      {"data", "std", &c.data.std,
       "per-channel standard deviation pixels are divided by, one value > 0 per channel"},
      {"data", "shuffle", &c.data.shuffle,
       "shuffle the training images every epoch (a seeded draw)"},
      {"data", "augment", &c.data.augment,
       "apply the augmentations below to training batches"},
      {"data", "val_fraction", &c.data.val_fraction,
       "share of the training split held out for validation (its end), in [0, 1)"},
      {"data", "class_names", &c.data.class_names,
       "class names, one per class; empty: from the dataset"},
      {"data", "label", &c.data.label,
       "cifar100 only: fine (100 classes) or coarse (20 superclasses) labels"},
      {"data", "resize", &c.data.resize,
       "folder only: resize every image to model.image_size"},
      {"data", "crop_padding", &c.data.crop_padding,
       "random crop after padding each side by this many pixels; 0 = off"},
      {"data", "hflip", &c.data.hflip,
       "probability of a horizontal flip"},
      {"data", "auto_augment", &c.data.auto_augment,
       "automatic augmentation after the crop and flip: none, or TrivialAugment (wide)"},
      {"data", "erasing", &c.data.erasing,
       "probability of random erasing (a rectangle of noise)"},
      {"data", "mixup", &c.data.mixup,
       "mixup strength, alpha of Beta(alpha, alpha); 0 = off"},
      {"data", "cutmix", &c.data.cutmix,
       "cutmix strength, alpha of Beta(alpha, alpha); 0 = off"},
      {"data", "mix_prob", &c.data.mix_prob,
       "probability that a batch is mixed when mixup or cutmix is on"},
      {"optim", "name", &c.optim.name,
       "optimizer"},
      {"optim", "lr", &c.optim.lr,
       "peak learning rate, > 0"},
      {"optim", "weight_decay", &c.optim.weight_decay,
       "weight decay of the weight matrices (decoupled with AdamW)"},
      {"optim", "beta1", &c.optim.beta1,
       "AdamW's first-moment decay, in [0, 1)"},
      {"optim", "beta2", &c.optim.beta2,
       "AdamW's second-moment decay, in [0, 1)"},
      {"optim", "momentum", &c.optim.momentum,
       "SGD's momentum, in [0, 1)"},
      {"optim", "schedule", &c.optim.schedule,
       "learning-rate schedule after the warm-up"},
      {"optim", "warmup_steps", &c.optim.warmup_steps,
       "steps of linear warm-up from 0 to optim.lr"},
      {"optim", "min_lr", &c.optim.min_lr,
       "learning rate at the end of the cosine schedule"},
      {"optim", "clip_grad_norm", &c.optim.clip_grad_norm,
       "clip the global gradient norm to this value; 0 = off"},
      {"optim", "label_smoothing", &c.optim.label_smoothing,
       "label smoothing of the cross-entropy targets, in [0, 1)"},
      {"optim", "ema_decay", &c.optim.ema_decay,
       "decay of the weights' moving average (ema.safetensors), in [0, 1); 0 = off"},
      {"train", "epochs", &c.train.epochs,
       "passes over the training split"},
      {"train", "max_steps", &c.train.max_steps,
       "stop after this many steps; 0 = from train.epochs"},
      {"train", "batch_size", &c.train.batch_size,
       "images per step (over all ranks with MPI)"},
      {"train", "seed", &c.train.seed,
       "seed of initialisation, data order, augmentation and dropout"},
      {"train", "threads", &c.train.threads,
       "threads; 0 = all cores (results do not depend on it)"},
      {"train", "out_dir", &c.train.out_dir,
       "run directory, unless train's --out names one"},
      {"train", "log_every", &c.train.log_every,
       "steps between metrics.jsonl lines and progress lines in a log"},
      {"train", "eval_every", &c.train.eval_every,
       "epochs between validation passes"},
      {"train", "unmasked_epochs", &c.train.unmasked_epochs,
       "the last epochs train on every patch, model.patch_drop off; 0 = none"},
      {"train", "precision", &c.train.precision,
       "the blocks' matrix products in training: fp32, or bf16 inputs with fp32 sums"},
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
std::string_view config_name(AutoAugment policy) { return word_of(policy); }
std::string_view config_name(OptimizerKind optimizer) { return word_of(optimizer); }
std::string_view config_name(LrSchedule schedule) { return word_of(schedule); }
std::string_view config_name(AttentionForm form) { return word_of(form); }
std::string_view config_name(PosEmbedKind pos_embed) { return word_of(pos_embed); }
std::string_view config_name(PoolKind pool) { return word_of(pool); }
std::string_view config_name(PatchEmbedKind patch_embed) { return word_of(patch_embed); }
std::string_view config_name(Precision precision) { return word_of(precision); }

}  // namespace minivit
