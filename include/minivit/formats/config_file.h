#pragma once
// The run configuration as a TOML file: reading (with --set overrides), checking and
// writing. Loading checks types, unknown keys and impossible values, naming the file, line
// and key at fault.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "minivit/core/config.h"

namespace minivit {

// Reads `path`, applies `overrides` ("section.key=value", TOML value syntax, bare strings
// allowed), validates. Throws minivit::Error: "FILE:LINE: key 'model.dim': expected ...".
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Same, from TOML text already in memory (`source_name` is used in messages).
Config parse_config(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides = {});

// Checks cross-key constraints (dim % heads, image_size % patch_size, rates in range,
// mean/std length == channels...). Called by load/parse; exposed for configs built in code.
void validate_config(const Config& config);

// The resolved config as TOML text, every key written, re-readable by load_config.
std::string config_to_toml(const Config& config);

// One config key as `minivit config` prints it and docs/config.md lists it.
struct ConfigKey {
  std::string name;                  // "model.dim"
  std::string type;                  // "integer", "float", "boolean", "string", "choice",
                                     // "array of floats", "array of strings"
  std::string default_text;          // the default as TOML text: 64, "learned", []
  std::vector<std::string> choices;  // a choice's words, in the table's order; else empty
  std::string meaning;               // one line
};

// Every key the config reader accepts, in file order.
std::vector<ConfigKey> config_keys();

// config_to_toml with each key's meaning (and a choice's words) as a comment after it.
std::string config_to_commented_toml(const Config& config);

// Flat "section.key" -> value-as-TOML-text pairs, for checkpoint metadata ("minivit." is
// prepended by the checkpoint writer). config_from_flat inverts it.
std::vector<std::pair<std::string, std::string>> config_to_flat(const Config& config);
Config config_from_flat(const std::vector<std::pair<std::string, std::string>>& flat,
                        const std::string& source_name);

// The word a config file uses for a choice ("cifar10", "sgd"), as config_to_toml writes it.
std::string_view config_name(DataFormat format);
std::string_view config_name(Cifar100Label label);
std::string_view config_name(AutoAugment policy);
std::string_view config_name(OptimizerKind optimizer);
std::string_view config_name(LrSchedule schedule);
std::string_view config_name(AttentionForm form);
std::string_view config_name(PosEmbedKind pos_embed);
std::string_view config_name(PoolKind pool);
std::string_view config_name(PatchEmbedKind patch_embed);
std::string_view config_name(Precision precision);

}  // namespace minivit
