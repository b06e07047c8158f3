// Loading and writing the run configuration.
//
// One table (fields_of, config_fields.cpp) lists every key once: its section, its name and
// where it lives in Config. Reading a file, applying --set overrides, the flat checkpoint
// form and the TOML writer all walk that table, so adding a key is one line there plus its
// checks in config_check.cpp. Errors are one line, "WHERE: key 'section.key': expected ...,
// got ...", where WHERE is FILE:LINE for a key read from a file and "--set k=v" for an
// override.
#include "minivit/formats/config_file.h"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cfloat>
#include <climits>
#include <cmath>
#include <optional>
#include <sstream>
#include <string_view>
#include <variant>

#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/core/utf8.h"
#include "config_fields.h"

// Without exceptions toml::parse returns a result object instead of throwing, and the
// error handling below would silently be skipped.
static_assert(TOML_EXCEPTIONS, "minivit expects toml++ built with exceptions");

namespace minivit {

using namespace config_fields;

namespace {

constexpr std::string_view kSections[] = {"model", "data", "optim", "train"};

bool is_section(std::string_view name) {
  return std::find(std::begin(kSections), std::end(kSections), name) != std::end(kSections);
}

Field* find_field(std::vector<Field>& fields, std::string_view section, std::string_view key) {
  for (Field& field : fields)
    if (field.section == section && field.key == key) return &field;
  return nullptr;
}

Field* find_field(std::vector<Field>& fields, std::string_view dotted_name) {
  size_t dot = dotted_name.find('.');
  if (dot == std::string_view::npos) return nullptr;
  return find_field(fields, dotted_name.substr(0, dot), dotted_name.substr(dot + 1));
}

// The hint appended to "unknown key" messages, so a typo can be fixed without the docs.
std::string known_keys_hint(std::vector<Field>& fields, std::string_view section) {
  std::string hint;
  if (is_section(section)) {
    hint = " (keys in [" + std::string(section) + "]:";
    for (const Field& field : fields)
      if (field.section == section) hint += " " + std::string(field.key);
  } else {
    hint = " (sections:";
    for (std::string_view s : kSections) hint += " " + std::string(s);
  }
  return hint + ")";
}

std::string at_line(const std::string& source, uint32_t line) {
  // Line 0 means toml++ does not know it (e.g. a table created implicitly by [a.b]).
  return line == 0 ? source : source + ":" + std::to_string(line);
}

std::string one_line(std::string_view text) {
  std::string out(text);
  std::replace(out.begin(), out.end(), '\n', ' ');
  return out;
}

// A value as quoted in an error message: on one line and not too long.
std::string describe(const toml::node& node) {
  std::string text;
  if (node.is_table()) return "a table";
  if (const toml::array* array = node.as_array()) {
    text = "[";
    for (size_t i = 0; i < array->size(); ++i)
      text += (i ? ", " : "") + describe(*array->get(i));
    text += "]";
  } else if (const auto* number = node.as_floating_point()) {
    char buffer[64];
    auto end = std::to_chars(buffer, buffer + sizeof buffer, number->get());
    text.assign(buffer, end.ptr);
  } else {
    std::ostringstream out;
    out << toml::toml_formatter{node, toml::format_flags::allow_unicode_strings};
    text = one_line(out.str());
  }
  constexpr size_t kMaxLength = 80;
  if (text.size() > kMaxLength) text = text.substr(0, kMaxLength - 3) + "...";
  return text;
}

// --- reading one value into its field ----------------------------------------------------
// Each read_into returns what was expected when the node does not fit its field, or
// nothing after storing the value.

using Expected = std::optional<std::string>;

std::optional<double> as_number(const toml::node& node) {
  if (const auto* f = node.as_floating_point()) return f->get();
  if (const auto* i = node.as_integer()) return static_cast<double>(i->get());
  return std::nullopt;
}

Expected read_into(const toml::node& node, int& out) {
  const auto* integer = node.as_integer();
  if (!integer) return "an integer";
  if (integer->get() < INT_MIN || integer->get() > INT_MAX) return "a 32-bit integer";
  out = static_cast<int>(integer->get());
  return std::nullopt;
}

Expected read_into(const toml::node& node, int64_t& out) {
  const auto* integer = node.as_integer();
  if (!integer) return "an integer";
  out = integer->get();
  return std::nullopt;
}

Expected read_into(const toml::node& node, uint64_t& out) {
  const auto* integer = node.as_integer();
  if (!integer || integer->get() < 0) return "a non-negative integer";
  out = static_cast<uint64_t>(integer->get());
  return std::nullopt;
}

Expected read_float(const toml::node& node, float& out) {
  std::optional<double> number = as_number(node);
  if (!number) return "a number";
  if (!std::isfinite(*number)) return "a finite number";
  if (std::fabs(*number) > FLT_MAX) return "a number in float range";
  out = static_cast<float>(*number);
  return std::nullopt;
}

Expected read_into(const toml::node& node, float& out) { return read_float(node, out); }

Expected read_into(const toml::node& node, bool& out) {
  const auto* boolean = node.as_boolean();
  if (!boolean) return "true or false";
  out = boolean->get();
  return std::nullopt;
}

Expected read_into(const toml::node& node, std::string& out) {
  const auto* string = node.as_string();
  if (!string) return "a string";
  out = string->get();
  return std::nullopt;
}

// A choice is one of its words, e.g. data.format = "cifar10".
template <IsChoice Choice>
Expected read_into(const toml::node& node, Choice& out) {
  std::string word;
  if (Expected expected = read_into(node, word)) return expected;
  const std::span<const std::string_view> words = choice_words(out);
  std::string list;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == word) {
      out = static_cast<Choice>(i);
      return std::nullopt;
    }
    list += (i ? ", " : "") + format_string(std::string(words[i]));
  }
  return "one of " + list;
}

Expected read_into(const toml::node& node, std::vector<float>& out) {
  const toml::array* array = node.as_array();
  if (!array) return "an array of numbers";
  std::vector<float> values(array->size());
  for (size_t i = 0; i < array->size(); ++i)
    if (Expected element = read_float(*array->get(i), values[i]))
      return "an array of numbers (element " + std::to_string(i) + ": " + *element + ")";
  out = std::move(values);
  return std::nullopt;
}

Expected read_into(const toml::node& node, std::vector<std::string>& out) {
  const toml::array* array = node.as_array();
  if (!array) return "an array of strings";
  std::vector<std::string> values(array->size());
  for (size_t i = 0; i < array->size(); ++i)
    if (read_into(*array->get(i), values[i])) return "an array of strings";
  out = std::move(values);
  return std::nullopt;
}

void assign(const Field& field, const toml::node& node, const std::string& where) {
  Expected expected =
      std::visit([&](auto* target) { return read_into(node, *target); }, field.target);
  if (expected)
    fail(where, "key '" + field.name() + "': expected " + *expected + ", got " + describe(node));
}

// Keys whose values TOML writes as strings: text and choices.
bool is_string_field(const Field& field) {
  return std::visit(
      [](auto* target) {
        using Value = std::remove_pointer_t<decltype(target)>;
        return std::is_same_v<Value, std::string> || IsChoice<Value>;
      },
      field.target);
}

// --- parsing ------------------------------------------------------------------------------

toml::table parse_toml(const std::string& text, const std::string& source_name) {
  try {
    return toml::parse(std::string_view(text), std::string_view(source_name));
  } catch (const toml::parse_error& error) {
    fail(at_line(source_name, error.source().begin.line), one_line(error.description()));
  }
}

// A single TOML value written as "x = <text>", or nothing if the text is not one.
std::optional<toml::table> parse_toml_value(const std::string& text) {
  try {
    toml::table document = toml::parse(std::string_view("x = " + text));
    // A newline inside `text` could smuggle in more keys; that is not one value.
    if (document.size() != 1) return std::nullopt;
    return document;
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
}

void read_document(const toml::table& root, const std::string& source, std::vector<Field>& fields,
                   Origins& origins) {
  struct Entry {
    uint32_t line;
    std::string section;
    std::string key;  // empty: the entry is the section itself
    const toml::node* node;
  };
  std::vector<Entry> entries;
  for (const auto& [section_key, section_node] : root) {
    std::string section(section_key.str());
    const toml::table* table = section_node.as_table();
    if (!is_section(section) || !table) {
      entries.push_back({section_key.source().begin.line, section, "", &section_node});
      continue;
    }
    for (const auto& [key, node] : *table)
      entries.push_back({key.source().begin.line, section, std::string(key.str()), &node});
  }
  // toml++ keeps keys sorted by name; report the first problem in the file instead.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.line < b.line; });

  for (const Entry& entry : entries) {
    std::string where = at_line(source, entry.line);
    if (entry.key.empty()) {
      if (is_section(entry.section))
        fail(where, "key '" + entry.section + "': expected a section [" + entry.section +
                        "], got " + describe(*entry.node));
      if (entry.node->is_table())
        fail(where, "unknown section [" + entry.section + "]" + known_keys_hint(fields, ""));
      fail(where, "key '" + entry.section + "' is outside any section" +
                      known_keys_hint(fields, ""));
    }
    Field* field = find_field(fields, entry.section, entry.key);
    if (!field)
      fail(where, "unknown key '" + entry.section + "." + entry.key + "'" +
                      known_keys_hint(fields, entry.section));
    assign(*field, *entry.node, where);
    origins[field->name()] = {where, false};
  }
}

std::string trim(std::string_view text) {
  const char* space = " \t\r\n";
  size_t begin = text.find_first_not_of(space);
  if (begin == std::string_view::npos) return "";
  size_t end = text.find_last_not_of(space);
  return std::string(text.substr(begin, end - begin + 1));
}

void apply_override(const std::string& override_text, std::vector<Field>& fields,
                    Origins& origins) {
  std::string where = "--set " + one_line(override_text);
  if (!is_valid_utf8(override_text)) fail(where, "not valid UTF-8 text, as TOML requires");
  size_t equals = override_text.find('=');
  if (equals == std::string::npos) fail(where, "expected section.key=value");
  std::string name = trim(std::string_view(override_text).substr(0, equals));
  std::string value_text = trim(std::string_view(override_text).substr(equals + 1));

  Field* field = find_field(fields, name);
  if (!field) {
    std::string section = name.substr(0, name.find('.'));
    fail(where, "unknown key '" + name + "'" + known_keys_hint(fields, section));
  }

  // Bare words are the natural way to type paths and names on a command line
  // (--set data.format=cifar10); for a string key even a number or date is meant literally.
  std::optional<toml::table> document = parse_toml_value(value_text);
  const toml::node* parsed = document ? document->get("x") : nullptr;
  toml::value<std::string> bare(value_text);
  const toml::node& value = (parsed && !(is_string_field(*field) && !parsed->is_string()))
                                ? *parsed
                                : static_cast<const toml::node&>(bare);
  assign(*field, value, where);
  origins[field->name()] = {where, true};
}

}  // namespace

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  // A config from a stream (a pipe, standard input) is text: a megabyte is plenty.
  constexpr uint64_t kStreamCap = uint64_t(1) << 20;
  return parse_config(read_file(path, kStreamCap), is_stdin_path(path) ? "standard input" : path,
                      overrides);
}

Config parse_config(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides) {
  Config config;
  config.source = source_name;
  std::vector<Field> fields = fields_of(config);
  Origins origins;
  read_document(parse_toml(toml_text, source_name), source_name, fields, origins);
  for (const std::string& override_text : overrides) apply_override(override_text, fields, origins);
  check_config(config, source_name, origins);
  return config;
}

namespace {

// Every key of `config` as TOML, section by section in the table's order; with `comment_of`,
// each line ends with "  # " and what it returns for the key.
std::string write_toml(const Config& config, std::string (*comment_of)(const Field& field)) {
  Config copy = config;  // fields_of needs a mutable Config; nothing is written
  std::string text;
  std::string_view section;
  for (const Field& field : fields_of(copy)) {
    if (field.section != section) {
      text += (section.empty() ? "[" : "\n[") + std::string(field.section) + "]\n";
      section = field.section;
    }
    text += std::string(field.key) + " = " + to_toml_text(field);
    text += (comment_of ? "  # " + comment_of(field) : std::string()) + "\n";
  }
  return text;
}

// The word docs/config.md and `minivit config` use for a key's type.
template <typename T>
struct TypeWord;
template <> struct TypeWord<int> { static constexpr std::string_view word = "integer"; };
template <> struct TypeWord<int64_t> { static constexpr std::string_view word = "integer"; };
template <> struct TypeWord<uint64_t> { static constexpr std::string_view word = "integer"; };
template <> struct TypeWord<float> { static constexpr std::string_view word = "float"; };
template <> struct TypeWord<bool> { static constexpr std::string_view word = "boolean"; };
template <> struct TypeWord<std::string> { static constexpr std::string_view word = "string"; };
template <> struct TypeWord<std::vector<float>> {
  static constexpr std::string_view word = "array of floats";
};
template <> struct TypeWord<std::vector<std::string>> {
  static constexpr std::string_view word = "array of strings";
};

ConfigKey describe(const Field& field) {
  ConfigKey key{field.name(), "", to_toml_text(field), {}, std::string(field.meaning)};
  std::visit(
      [&key](auto* target) {
        using T = std::remove_pointer_t<decltype(target)>;
        if constexpr (config_fields::IsChoice<T>) {
          key.type = "choice";
          for (std::string_view word : config_fields::choice_words(*target))
            key.choices.emplace_back(word);
        } else {
          key.type = TypeWord<T>::word;
        }
      },
      field.target);
  return key;
}

}  // namespace

std::string config_to_toml(const Config& config) { return write_toml(config, nullptr); }

std::vector<ConfigKey> config_keys() {
  Config defaults;  // fields_of needs a mutable Config; nothing is written
  std::vector<ConfigKey> keys;
  for (const Field& field : fields_of(defaults)) keys.push_back(describe(field));
  return keys;
}

std::string config_to_commented_toml(const Config& config) {
  return write_toml(config, [](const Field& field) {
    const ConfigKey key = describe(field);
    std::string comment = key.meaning;
    for (size_t i = 0; i < key.choices.size(); ++i)
      comment += (i ? ", \"" : "; one of \"") + key.choices[i] + "\"";
    return comment;
  });
}

std::vector<std::pair<std::string, std::string>> config_to_flat(const Config& config) {
  Config copy = config;  // fields_of needs a mutable Config; nothing is written
  std::vector<std::pair<std::string, std::string>> flat;
  for (const Field& field : fields_of(copy)) flat.emplace_back(field.name(), to_toml_text(field));
  return flat;
}

Config config_from_flat(const std::vector<std::pair<std::string, std::string>>& flat,
                        const std::string& source_name) {
  Config config;
  config.source = source_name;
  std::vector<Field> fields = fields_of(config);
  // Keys absent from `flat` keep their defaults, so checkpoints written before a key
  // existed still load.
  for (const auto& [name, value_text] : flat) {
    Field* field = find_field(fields, name);
    if (!field) fail(source_name, "unknown key '" + name + "'");
    std::optional<toml::table> document = parse_toml_value(value_text);
    if (!document)
      fail(source_name, "key '" + name + "': expected a TOML value, got " + one_line(value_text));
    assign(*field, *document->get("x"), source_name);
  }
  validate_config(config);
  return config;
}

}  // namespace minivit
