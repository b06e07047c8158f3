#pragma once
// What the config reader's parts share: the table of keys (config_fields.cpp), where each
// key was set, and the TOML text of values. config_file.cpp reads and writes configs
// through the table; config_check.cpp checks the values and names the key at fault.
// Internal to src/formats.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "minivit/core/config.h"
#include "minivit/formats/config_file.h"

namespace minivit::config_fields {

using FieldTarget = std::variant<int*, int64_t*, uint64_t*, float*, bool*, std::string*,
                                 std::vector<float>*, std::vector<std::string>*, DataFormat*,
                                 Cifar100Label*, AutoAugment*, OptimizerKind*, LrSchedule*,
                                 AttentionForm*, PosEmbedKind*, PoolKind*, PatchEmbedKind*,
                                 Precision*>;

struct Field {
  std::string_view section;
  std::string_view key;
  FieldTarget target;
  std::string_view meaning;  // one line, for `minivit config` and docs/config.md
  std::string name() const { return std::string(section) + "." + std::string(key); }
};

// Every key of `c`, in file order; config_to_toml writes them in this order.
std::vector<Field> fields_of(Config& c);

// Where each key was set, so checks between keys can point at the line to fix. Keys left
// at their defaults are absent.
struct Origin {
  std::string where;  // "FILE:LINE" or "--set k=v"
  bool is_override;
};
using Origins = std::map<std::string, Origin>;

// The words of a choice's values in enumerator order: the one table between the text of
// config files and the enums. The argument only picks the table.
std::span<const std::string_view> choice_words(DataFormat);
std::span<const std::string_view> choice_words(Cifar100Label);
std::span<const std::string_view> choice_words(AutoAugment);
std::span<const std::string_view> choice_words(OptimizerKind);
std::span<const std::string_view> choice_words(LrSchedule);
std::span<const std::string_view> choice_words(AttentionForm);
std::span<const std::string_view> choice_words(PosEmbedKind);
std::span<const std::string_view> choice_words(PoolKind);
std::span<const std::string_view> choice_words(PatchEmbedKind);
std::span<const std::string_view> choice_words(Precision);

template <typename Choice>
concept IsChoice = std::is_enum_v<Choice>;

// Throws minivit::Error("WHERE: WHAT").
[[noreturn]] void fail(const std::string& where, const std::string& what);

// Shortest text that reads back as the same float, in TOML syntax.
std::string format_float(float value);

// A basic "..." TOML string with escapes, on one line.
std::string format_string(const std::string& value);

// --- writing one value as TOML text --------------------------------------------------------

std::string to_toml_text(int value);
std::string to_toml_text(int64_t value);
std::string to_toml_text(uint64_t value);
std::string to_toml_text(float value);
std::string to_toml_text(bool value);
std::string to_toml_text(const std::string& value);

template <IsChoice Choice>
std::string to_toml_text(Choice value) {
  return format_string(std::string(config_name(value)));
}

template <typename T>
std::string to_toml_text(const std::vector<T>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + to_toml_text(values[i]);
  return text + "]";
}

std::string to_toml_text(const Field& field);

// Runs every value check (config_check.cpp), naming the line of the key at fault when
// `origins` knows it and `source` otherwise.
void check_config(const Config& config, const std::string& source, const Origins& origins);

}  // namespace minivit::config_fields
