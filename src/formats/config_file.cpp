// Loading, checking and writing the run configuration.
//
// One table (fields_of) lists every key once: its section, its name and where it lives in
// Config. Reading a file, applying --set overrides, the flat checkpoint form and the TOML
// writer all walk that table, so adding a key is one line there plus its checks in
// check_config. Errors are one line, "WHERE: key 'section.key': expected ..., got ...",
// where WHERE is FILE:LINE for a key read from a file and "--set k=v" for an override.
#include "minivit/formats/config_file.h"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <variant>

#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/core/utf8.h"

// Without exceptions toml::parse returns a result object instead of throwing, and the
// error handling below would silently be skipped.
static_assert(TOML_EXCEPTIONS, "minivit expects toml++ built with exceptions");

namespace minivit {
namespace {

using FieldTarget = std::variant<int*, int64_t*, uint64_t*, float*, bool*, std::string*,
                                 std::vector<float>*, std::vector<std::string>*>;

struct Field {
  std::string_view section;
  std::string_view key;
  FieldTarget target;
  std::string name() const { return std::string(section) + "." + std::string(key); }
};

constexpr std::string_view kSections[] = {"model", "data", "optim", "train"};

// In file order; config_to_toml writes them in this order.
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
      {"model", "num_classes", &c.model.num_classes},
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
      {"train", "epochs", &c.train.epochs},
      {"train", "max_steps", &c.train.max_steps},
      {"train", "batch_size", &c.train.batch_size},
      {"train", "seed", &c.train.seed},
      {"train", "threads", &c.train.threads},
      {"train", "out_dir", &c.train.out_dir},
      {"train", "log_every", &c.train.log_every},
      {"train", "eval_every", &c.train.eval_every},
  };
}

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

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error(where + ": " + what);
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

// Shortest text that reads back as the same float, in TOML syntax.
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

// --- writing one value as TOML text --------------------------------------------------------

std::string to_toml_text(int value) { return std::to_string(value); }
std::string to_toml_text(int64_t value) { return std::to_string(value); }
std::string to_toml_text(uint64_t value) { return std::to_string(value); }
std::string to_toml_text(float value) { return format_float(value); }
std::string to_toml_text(bool value) { return value ? "true" : "false"; }
std::string to_toml_text(const std::string& value) { return format_string(value); }

template <typename T>
std::string to_toml_text(const std::vector<T>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + to_toml_text(values[i]);
  return text + "]";
}

std::string to_toml_text(const Field& field) {
  return std::visit([](auto* target) { return to_toml_text(*target); }, field.target);
}

bool is_string_field(const Field& field) {
  return std::holds_alternative<std::string*>(field.target);
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

// Where each key was set, so checks between keys can point at the line to fix. Keys left
// at their defaults are absent.
struct Origin {
  std::string where;  // "FILE:LINE" or "--set k=v"
  bool is_override;
};
using Origins = std::map<std::string, Origin>;

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

// --- checks between and on values --------------------------------------------------------

std::string quoted(const std::string& text) { return format_string(text); }

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
    unit_interval("model.dropout", m.dropout);
    unit_interval("model.attention_dropout", m.attention_dropout);

    one_of("data.format", d.format, {"idx", "cifar10", "cifar100", "folder"});
    per_channel("data.mean", d.mean);
    per_channel("data.std", d.std);
    for (float s : d.std)
      if (!(s > 0)) fail_at("data.std", "expected values > 0, got " + to_toml_text(d.std));
    unit_interval("data.val_fraction", d.val_fraction);
    one_of("data.label", d.label, {"fine", "coarse"});
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

    one_of("optim.name", o.name, {"adamw", "sgd"});
    if (!(o.lr > 0)) fail_at("optim.lr", "expected a value > 0, got " + format_float(o.lr));
    at_least("optim.weight_decay", o.weight_decay, 0.0f);
    unit_interval("optim.beta1", o.beta1);
    unit_interval("optim.beta2", o.beta2);
    unit_interval("optim.momentum", o.momentum);
    one_of("optim.schedule", o.schedule, {"cosine", "constant"});
    at_least("optim.warmup_steps", o.warmup_steps, int64_t{0});
    at_least("optim.min_lr", o.min_lr, 0.0f);
    at_least("optim.clip_grad_norm", o.clip_grad_norm, 0.0f);
    unit_interval("optim.label_smoothing", o.label_smoothing);

    at_least("train.epochs", t.epochs, 1);
    at_least("train.max_steps", t.max_steps, int64_t{0});
    at_least("train.batch_size", t.batch_size, 1);
    // TOML integers are signed 64-bit, so a larger seed could not be written back.
    if (t.seed > static_cast<uint64_t>(INT64_MAX))
      fail_at("train.seed", "expected an integer at most " + std::to_string(INT64_MAX) +
                                ", got " + std::to_string(t.seed));
    at_least("train.threads", t.threads, 0);
    if (t.threads > 1024)
      fail_at("train.threads", "expected 0 (all cores) up to 1024, got " + std::to_string(t.threads));
    positive("train.batch_size", t.batch_size, 1 << 20);
    at_least("train.log_every", t.log_every, 1);
    at_least("train.eval_every", t.eval_every, 1);
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

  void one_of(const std::string& name, const std::string& value,
              std::initializer_list<const char*> choices) const {
    std::string list;
    for (const char* choice : choices) {
      if (value == choice) return;
      list += (list.empty() ? "" : ", ") + quoted(choice);
    }
    fail_at(name, "expected one of " + list + ", got " + quoted(value));
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

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  return parse_config(read_file(path), path, overrides);
}

Config parse_config(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides) {
  Config config;
  config.source = source_name;
  std::vector<Field> fields = fields_of(config);
  Origins origins;
  read_document(parse_toml(toml_text, source_name), source_name, fields, origins);
  for (const std::string& override_text : overrides) apply_override(override_text, fields, origins);
  ConfigChecker(config, source_name, origins).run();
  return config;
}

void validate_config(const Config& config) {
  ConfigChecker(config, config.source, Origins{}).run();
}

std::string config_to_toml(const Config& config) {
  Config copy = config;  // fields_of needs a mutable Config; nothing is written
  std::string text;
  std::string_view section;
  for (const Field& field : fields_of(copy)) {
    if (field.section != section) {
      text += (section.empty() ? "[" : "\n[") + std::string(field.section) + "]\n";
      section = field.section;
    }
    text += std::string(field.key) + " = " + to_toml_text(field) + "\n";
  }
  return text;
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
