// The checks on config values, alone and between keys. A broken one names the key and,
// when it was set in a file or by --set, where.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "config_fields.h"
#include "minivit/formats/config_file.h"

namespace minivit {
namespace config_fields {
namespace {

// Runs every value check, naming the line of the key at fault when `origins` knows it.
class ConfigChecker {
 public:
  ConfigChecker(const Config& config, const std::string& source, const Origins& origins)
      : config_(config), source_(source.empty() ? "config" : source), origins_(origins) {}

  void run() {
    const ModelConfig& m = config_.model;
    const DataConfig& d = config_.data;
    const OptimConfig& o = config_.optim;
    const TrainConfig& t = config_.train;

    check_finite_floats();

    // Upper bounds far beyond any model this trainer is for; they keep every size product
    // inside 64-bit arithmetic. Whether a model fits in memory is checked before allocating.
    positive("model.image_size", m.image_size, 8192);
    positive("model.channels", m.channels, 16);
    positive("model.patch_size", m.patch_size, 8192);
    positive("model.dim", m.dim, 65536);
    positive("model.depth", m.depth, 4096);
    positive("model.heads", m.heads, 4096);
    positive("model.mlp_dim", m.mlp_dim, 262144);
    positive("model.stem_channels", m.stem_channels, 65536);
    at_least("model.num_classes", m.num_classes, 2);
    positive("model.num_classes", m.num_classes, 1 << 20);
    // The sizes are positive from here on, so the remainders below are defined.
    either(m.dim % m.heads == 0,
           "model.dim", std::to_string(m.dim) + " is not divisible by model.heads = " +
                            std::to_string(m.heads),
           "model.heads", std::to_string(m.heads) + " does not divide model.dim = " +
                              std::to_string(m.dim));
    either(m.image_size % m.patch_size == 0,
           "model.image_size", std::to_string(m.image_size) +
                                   " is not divisible by model.patch_size = " +
                                   std::to_string(m.patch_size),
           "model.patch_size", std::to_string(m.patch_size) +
                                   " does not divide model.image_size = " +
                                   std::to_string(m.image_size));
    // Its table gives each grid axis half the width, as a sine and a cosine block each.
    either(m.pos_embed != PosEmbedKind::sincos2d || m.dim % 4 == 0,
           "model.dim", std::to_string(m.dim) +
                            " is not divisible by 4, as model.pos_embed = \"sincos2d\" needs",
           "model.pos_embed", "\"sincos2d\" needs model.dim divisible by 4, but model.dim = " +
                                  std::to_string(m.dim));
    // A shift of half a patch is no shift at all for 1-pixel patches.
    either(m.patch_embed != PatchEmbedKind::shifted || m.patch_size >= 2,
           "model.patch_size", "1 leaves nothing to shift by, as model.patch_embed = \"shifted\" "
                               "needs patches of 2 pixels or more",
           "model.patch_embed", "\"shifted\" needs model.patch_size >= 2, but model.patch_size = " +
                                    std::to_string(m.patch_size));
    // Each of the conv stem's convolutions halves the image, down to one position a patch.
    const bool power_of_two = m.patch_size >= 2 && (m.patch_size & (m.patch_size - 1)) == 0;
    either(m.patch_embed != PatchEmbedKind::conv || power_of_two,
           "model.patch_size", std::to_string(m.patch_size) +
                                   " is not a power of two of at least 2, as model.patch_embed = "
                                   "\"conv\" needs (one stride-2 convolution per halving)",
           "model.patch_embed", "\"conv\" needs model.patch_size a power of two of at least 2, "
                                "but model.patch_size = " + std::to_string(m.patch_size));
    // The stem doubles its channels at every convolution.
    if (m.patch_embed == PatchEmbedKind::conv && power_of_two)
      either(int64_t(m.stem_channels) * m.patch_size / 2 <= 65536,
             "model.stem_channels", std::to_string(m.stem_channels) + " doubled at each of the " +
                                        std::to_string(m.stem_stages()) +
                                        " convolutions exceeds 65536 channels",
             "model.patch_size", std::to_string(m.patch_size) + " takes model.stem_channels = " +
                                     std::to_string(m.stem_channels) + " past 65536 channels");
    unit_interval("model.dropout", m.dropout);
    unit_interval("model.attention_dropout", m.attention_dropout);
    unit_interval("model.drop_path", m.drop_path);
    unit_interval("model.patch_drop", m.patch_drop);

    per_channel("data.mean", d.mean);
    per_channel("data.std", d.std);
    for (float s : d.std)
      if (!(s > 0)) fail_at("data.std", "expected values > 0, got " + to_toml_text(d.std));
    unit_interval("data.val_fraction", d.val_fraction);
    either(d.crop_padding >= 0 && d.crop_padding < m.image_size,
           "data.crop_padding", "expected 0 (off) up to model.image_size - 1 = " +
                                    std::to_string(m.image_size - 1) + ", got " +
                                    std::to_string(d.crop_padding),
           "model.image_size", std::to_string(m.image_size) + " is not larger than data.crop_padding = " +
                                   std::to_string(d.crop_padding));
    probability("data.hflip", d.hflip);
    probability("data.erasing", d.erasing);
    at_least("data.mixup", d.mixup, 0.0f);
    at_least("data.cutmix", d.cutmix, 0.0f);
    probability("data.mix_prob", d.mix_prob);
    size_t classes = static_cast<size_t>(m.num_classes);
    either(d.class_names.empty() || d.class_names.size() == classes,
           "data.class_names", "expected " + std::to_string(classes) +
                                   " names (model.num_classes) or none, got " +
                                   std::to_string(d.class_names.size()),
           "model.num_classes", std::to_string(classes) + " classes but data.class_names has " +
                                    std::to_string(d.class_names.size()) + " names");

    if (!(o.lr > 0)) fail_at("optim.lr", "expected a value > 0, got " + format_float(o.lr));
    at_least("optim.weight_decay", o.weight_decay, 0.0f);
    unit_interval("optim.beta1", o.beta1);
    unit_interval("optim.beta2", o.beta2);
    unit_interval("optim.momentum", o.momentum);
    at_least("optim.warmup_steps", o.warmup_steps, int64_t{0});
    at_least("optim.min_lr", o.min_lr, 0.0f);
    at_least("optim.clip_grad_norm", o.clip_grad_norm, 0.0f);
    unit_interval("optim.label_smoothing", o.label_smoothing);
    unit_interval("optim.ema_decay", o.ema_decay);

    at_least("train.epochs", t.epochs, 1);
    at_least("train.max_steps", t.max_steps, int64_t{0});
    at_least("train.batch_size", t.batch_size, 1);
    // TOML integers are signed 64-bit, so a larger seed could not be written back.
    if (t.seed > static_cast<uint64_t>(INT64_MAX))
      fail_at("train.seed", "expected an integer at most " + std::to_string(INT64_MAX) +
                                ", got " + std::to_string(t.seed));
    at_least("train.threads", t.threads, 0);
    if (t.threads > kMaxThreads)
      fail_at("train.threads", "expected 0 (all cores) up to " + std::to_string(kMaxThreads) +
                                   ", got " + std::to_string(t.threads));
    positive("train.batch_size", t.batch_size, 1 << 20);
    at_least("train.log_every", t.log_every, 1);
    at_least("train.eval_every", t.eval_every, 1);
    at_least("train.unmasked_epochs", t.unmasked_epochs, 0);
    // Without patch dropout every epoch is unmasked already.
    either(t.unmasked_epochs == 0 || m.patch_drop > 0.0f,
           "train.unmasked_epochs", std::to_string(t.unmasked_epochs) +
                                        " turns off a patch dropout that is not on: it needs "
                                        "model.patch_drop > 0",
           "model.patch_drop", "0 leaves train.unmasked_epochs = " +
                                   std::to_string(t.unmasked_epochs) + " nothing to turn off");
    // With train.max_steps the run's length is in steps; the tail is cut to fit at the start.
    either(t.max_steps > 0 || t.unmasked_epochs < t.epochs,
           "train.unmasked_epochs", "expected fewer than train.epochs = " +
                                        std::to_string(t.epochs) + ", got " +
                                        std::to_string(t.unmasked_epochs),
           "train.epochs", std::to_string(t.epochs) + " leaves no epoch with patch dropout "
                                                      "before train.unmasked_epochs = " +
                               std::to_string(t.unmasked_epochs));
  }

 private:
  std::string where(const std::string& name) const {
    auto found = origins_.find(name);
    return found != origins_.end() ? found->second.where : source_;
  }

  [[noreturn]] void fail_at(const std::string& name, const std::string& message) const {
    fail(where(name), "key '" + name + "': " + message);
  }

  // A broken constraint between two keys is reported at the one the user changed, with a
  // message phrased from that key's side: an override before a file key, a file key
  // before a default, else the first.
  void either(bool ok, const std::string& first, const std::string& first_message,
              const std::string& second, const std::string& second_message) const {
    if (ok) return;
    if (rank(second) > rank(first)) fail_at(second, second_message);
    fail_at(first, first_message);
  }

  int rank(const std::string& name) const {
    auto found = origins_.find(name);
    if (found == origins_.end()) return 0;
    return found->second.is_override ? 2 : 1;
  }

  void check_finite_floats() const {
    Config copy = config_;  // fields_of needs a mutable Config; nothing is written
    for (const Field& field : fields_of(copy)) {
      bool finite = true;
      if (auto* value = std::get_if<float*>(&field.target)) finite = std::isfinite(**value);
      if (auto* values = std::get_if<std::vector<float>*>(&field.target))
        for (float v : **values) finite = finite && std::isfinite(v);
      if (!finite)
        fail_at(field.name(), "expected a finite number, got " + to_toml_text(field));
    }
  }

  void positive(const std::string& name, int value, int maximum = INT32_MAX) const {
    if (value <= 0 || value > maximum)
      fail_at(name, "expected a positive integer" +
                        (maximum < INT32_MAX ? " up to " + std::to_string(maximum) : std::string()) +
                        ", got " + std::to_string(value));
  }

  template <typename T>
  void at_least(const std::string& name, T value, T minimum) const {
    if (!(value >= minimum))
      fail_at(name, "expected a value >= " + to_toml_text(minimum) + ", got " +
                        to_toml_text(value));
  }

  void probability(const std::string& name, float value) const {
    if (!(value >= 0.0f && value <= 1.0f))
      fail_at(name, "expected a probability in [0, 1], got " + format_float(value));
  }

  void unit_interval(const std::string& name, float value) const {
    if (!(value >= 0 && value < 1))
      fail_at(name, "expected a value in [0, 1), got " + format_float(value));
  }

  void per_channel(const std::string& name, const std::vector<float>& values) const {
    size_t channels = static_cast<size_t>(config_.model.channels);
    either(values.size() == channels,
           name, "expected one value per channel (model.channels = " +
                     std::to_string(channels) + "), got " + to_toml_text(values),
           "model.channels", std::to_string(channels) + " channels but " + name +
                                 " has length " + std::to_string(values.size()));
  }

  const Config& config_;
  std::string source_;
  const Origins& origins_;
};

}  // namespace

void check_config(const Config& config, const std::string& source, const Origins& origins) {
  ConfigChecker(config, source, origins).run();
}

}  // namespace config_fields

void validate_config(const Config& config) {
  config_fields::check_config(config, config.source, config_fields::Origins{});
}

}  // namespace minivit
