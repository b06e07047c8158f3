// The documentation against the code: docs/config.md lists exactly the keys the config
// reader accepts, with their types and defaults; docs/commands.md names every option of every
// command; every `build/minivit ...` line of README.md and docs/*.md parses through the
// program's own command-line table and names files that exist or that an earlier line of the
// same page makes; every relative link resolves.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "minivit/cli/command_line.h"
#include "minivit/core/error.h"
#include "minivit/formats/config_file.h"

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = MINIVIT_SOURCE_DIR;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// README.md and every page of docs/: the pages whose command lines are checked.
std::vector<fs::path> user_pages() {
  std::vector<fs::path> pages = {kRoot / "README.md"};
  for (const auto& entry : fs::directory_iterator(kRoot / "docs"))
    if (entry.path().extension() == ".md") pages.push_back(entry.path());
  std::sort(pages.begin(), pages.end());
  return pages;
}

// --- docs/config.md ------------------------------------------------------------------------

// The cells of a markdown table row, trimmed; empty for a line that is not a row.
std::vector<std::string> table_cells(const std::string& line) {
  std::vector<std::string> cells;
  if (line.size() < 2 || line.front() != '|') return cells;
  std::string cell;
  bool in_code = false;
  for (size_t i = 1; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '`') in_code = !in_code;
    if (c == '|' && !in_code && line[i - 1] != '\\') {
      const size_t first = cell.find_first_not_of(' ');
      const size_t last = cell.find_last_not_of(' ');
      cells.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
      cell.clear();
    } else {
      cell += c;
    }
  }
  return cells;
}

std::string unquote_code(const std::string& cell) {
  if (cell.size() >= 2 && cell.front() == '`' && cell.back() == '`')
    return cell.substr(1, cell.size() - 2);
  return cell;
}

struct DocumentedKey {
  std::string type, default_text, allowed, meaning;
  int line;
};

// The rows `| `section.key` | type | `default` | allowed | meaning |` of docs/config.md.
std::map<std::string, DocumentedKey> documented_keys() {
  std::map<std::string, DocumentedKey> keys;
  const std::vector<std::string> lines = lines_of(read_text(kRoot / "docs/config.md"));
  const std::regex key_cell(R"(`([a-z_]+\.[a-z_0-9]+)`)");
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::vector<std::string> cells = table_cells(lines[i]);
    std::smatch match;
    if (cells.size() < 5 || !std::regex_match(cells[0], match, key_cell)) continue;
    INFO("docs/config.md:" << i + 1);
    CHECK(keys.count(match[1]) == 0);
    keys[match[1]] = {cells[1], unquote_code(cells[2]), cells[3], cells[4], int(i + 1)};
  }
  return keys;
}

}  // namespace

TEST_CASE("docs/config.md lists every config key with its type and default, and no other",
          "[docs][config]") {
  const std::map<std::string, DocumentedKey> documented = documented_keys();
  std::set<std::string> accepted;
  for (const minivit::ConfigKey& key : minivit::config_keys()) {
    accepted.insert(key.name);
    INFO("key " << key.name << " (add a row `| `" << key.name << "` | " << key.type << " | `"
                << key.default_text << "` | ... | ... |` to docs/config.md)");
    const auto row = documented.find(key.name);
    REQUIRE(row != documented.end());
    INFO("docs/config.md:" << row->second.line);
    CHECK(row->second.type == key.type);
    CHECK(row->second.default_text == key.default_text);
    CHECK(!row->second.allowed.empty());
    CHECK(!row->second.meaning.empty());
    for (const std::string& choice : key.choices)
      CHECK(row->second.allowed.find("`\"" + choice + "\"`") != std::string::npos);
  }
  for (const auto& [name, row] : documented) {
    INFO("docs/config.md:" << row.line << " documents '" << name
                           << "', which the config reader does not accept");
    CHECK(accepted.count(name) == 1);
  }
}

TEST_CASE("minivit config prints a file that reads back as the same config", "[docs][config]") {
  const minivit::Config defaults;
  const minivit::Config file = minivit::load_config(
      (kRoot / "configs/fashion_mnist.toml").string(), {"model.depth=6", "data.class_names=[]"});
  for (const minivit::Config& config : {defaults, file}) {
    const std::string text = minivit::config_to_commented_toml(config);
    const minivit::Config back = minivit::parse_config(text, "printed");
    CHECK(minivit::config_to_toml(back) == minivit::config_to_toml(config));
    for (const minivit::ConfigKey& key : minivit::config_keys()) {
      INFO(key.name);
      CHECK(text.find("# " + key.meaning) != std::string::npos);
    }
  }
  CHECK(minivit::config_to_commented_toml(file).find("depth = 6  # ") != std::string::npos);
}

// --- docs/commands.md: every option of every command ---------------------------------------

TEST_CASE("docs/commands.md has a section for every command naming each of its options",
          "[docs][commands]") {
  const std::vector<std::string> lines = lines_of(read_text(kRoot / "docs/commands.md"));
  // "## minivit train" and the like, up to the next "## ".
  std::map<std::string, std::string> sections;
  std::string current;
  for (const std::string& line : lines) {
    if (line.rfind("## ", 0) == 0) {
      const std::regex heading(R"(## `?minivit ([a-z]+)`?.*)");
      std::smatch match;
      current = std::regex_match(line, match, heading) ? std::string(match[1]) : "";
      continue;
    }
    if (!current.empty()) sections[current] += line + "\n";
  }
  minivit::CommandLine command_line(false);
  std::set<std::string> commands;
  for (const CLI::App* command : command_line.app().get_subcommands({})) {
    const std::string name = command->get_name();
    commands.insert(name);
    INFO("command " << name << ": docs/commands.md needs a section '## minivit " << name << "'");
    REQUIRE(sections.count(name) == 1);
    for (const CLI::Option* option : command->get_options()) {
      if (option->get_name() == "--help") continue;
      const std::string shown = option->get_lnames().empty()
                                    ? option->get_name()
                                    : "--" + option->get_lnames().front();
      INFO("option " << shown << " of " << name);
      CHECK(sections[name].find("`" + shown) != std::string::npos);
    }
  }
  for (const auto& [name, text] : sections) {
    INFO("docs/commands.md has a section for 'minivit " << name << "', which is no command");
    CHECK(commands.count(name) == 1);
  }
}

// --- command lines in README.md and docs/*.md ----------------------------------------------

namespace {

struct ShellLine {
  std::string text;
  int line;  // where it starts in its page, 1-based
};

// The lines of the ```sh / ```bash blocks of a page, continuation lines joined.
std::vector<ShellLine> shell_lines(const fs::path& page) {
  std::vector<ShellLine> result;
  const std::vector<std::string> lines = lines_of(read_text(page));
  bool in_shell = false, in_other = false;
  std::string pending;
  int pending_line = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.rfind("```", 0) == 0) {
      if (in_shell || in_other) {
        in_shell = in_other = false;
      } else {
        const std::string language = line.substr(3);
        in_shell = language == "sh" || language == "bash" || language == "console";
        in_other = !in_shell;
      }
      continue;
    }
    if (!in_shell) continue;
    std::string text = line;
    if (text.rfind("$ ", 0) == 0) text = text.substr(2);
    if (pending.empty()) pending_line = int(i + 1);
    if (!text.empty() && text.back() == '\\') {
      pending += text.substr(0, text.size() - 1) + " ";
      continue;
    }
    result.push_back({pending + text, pending_line});
    pending.clear();
  }
  return result;
}

// The simple commands of a shell line, each as words: quotes and backslashes resolved,
// comments dropped, split at ; && || and |. A redirection's target (> FILE) is kept as a word
// after ">" so that the caller can count it as made.
std::vector<std::vector<std::string>> simple_commands(const std::string& text) {
  std::vector<std::vector<std::string>> commands(1);
  std::string word;
  bool has_word = false;
  auto end_word = [&] {
    if (has_word) commands.back().push_back(word);
    word.clear();
    has_word = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\'' || c == '"') {
      const size_t close = text.find(c, i + 1);
      word += text.substr(i + 1, close - i - 1);
      has_word = true;
      i = close == std::string::npos ? text.size() : close;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
      has_word = true;
    } else if (c == '#' && !has_word) {
      break;
    } else if (c == ' ' || c == '\t') {
      end_word();
    } else if (c == ';' || c == '|' || c == '&') {
      end_word();
      if (i + 1 < text.size() && text[i + 1] == c) ++i;
      if (!commands.back().empty()) commands.emplace_back();
    } else if (c == '>') {
      end_word();
      commands.back().push_back(">");
    } else {
      word += c;
      has_word = true;
    }
  }
  end_word();
  if (commands.back().empty()) commands.pop_back();
  return commands;
}

std::string normal_path(std::string path) {
  while (path.rfind("./", 0) == 0) path = path.substr(2);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// What the lines of one page have made so far, and what must exist.
class PageFiles {
 public:
  void made(const std::string& path) {
    if (!path.empty()) made_.insert(normal_path(path));
  }
  bool known(const std::string& raw) const {
    const std::string path = normal_path(raw);
    if (fs::exists(fs::path(path).is_absolute() ? fs::path(path) : kRoot / path)) return true;
    return std::any_of(made_.begin(), made_.end(), [&](const std::string& made) {
      return path == made || path.rfind(made + "/", 0) == 0;
    });
  }

 private:
  std::set<std::string> made_;
};

bool is_minivit(const std::string& word) { return fs::path(word).filename() == "minivit"; }

// Loads a documented config with its --set overrides when the config is one of the
// repository's (not one a run wrote): the keys and values of the --set words are checked too.
std::optional<minivit::Config> documented_config(const std::string& path,
                                                 const std::vector<std::string>& sets) {
  if (path.empty() || !fs::exists(kRoot / normal_path(path))) return std::nullopt;
  return minivit::load_config((kRoot / normal_path(path)).string(), sets);
}

// Parses one documented minivit command line, checks its inputs, and notes what it makes.
void check_minivit_line(const std::vector<std::string>& words, PageFiles& files) {
  minivit::CommandLine command_line(false);
  std::vector<std::string> args(words.begin(), words.end());
  std::vector<std::string> redirect_targets;
  for (auto it = args.begin(); it != args.end();) {
    if (*it == ">" && it + 1 != args.end()) {
      redirect_targets.push_back(*(it + 1));
      it = args.erase(it, it + 2);
    } else {
      ++it;
    }
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes the words last first
  try {
    command_line.app().parse(args);
  } catch (const CLI::CallForHelp&) {
    return;
  } catch (const CLI::CallForAllHelp&) {
    return;
  } catch (const CLI::CallForVersion&) {
    return;
  } catch (const CLI::ParseError& e) {
    FAIL_CHECK("does not parse: " << e.what());
    return;
  }
  std::vector<std::string> inputs, outputs = redirect_targets;
  const std::string name = command_line.command();
  if (name == "train") {
    const minivit::TrainOptions& o = command_line.train;
    inputs = {o.config_path, o.resume_dir, o.init_path};
    std::string out = o.out_dir.empty() ? o.resume_dir : o.out_dir;
    if (auto config = documented_config(o.config_path, o.sets); config && out.empty())
      out = config->train.out_dir;
    outputs.push_back(out);
  } else if (name == "eval") {
    inputs = {command_line.eval.checkpoint, command_line.eval.data_path};
    outputs.push_back(command_line.eval.json_path);
  } else if (name == "attention") {
    inputs = command_line.attention.images;
    inputs.push_back(command_line.attention.checkpoint);
    outputs.push_back(command_line.attention.out_dir);
  } else if (name == "predict") {
    inputs = command_line.predict.images;
    inputs.push_back(command_line.predict.checkpoint);
    outputs.push_back(command_line.predict.json_path);
  } else if (name == "info") {
    inputs = {command_line.info_path};
  } else if (name == "bench") {
    inputs = {command_line.bench.config_path};
    documented_config(command_line.bench.config_path, command_line.bench.sets);
    outputs.push_back(command_line.bench.json_path);
  } else if (name == "export") {
    inputs = {command_line.export_options.config_path};
    documented_config(command_line.export_options.config_path, command_line.export_options.sets);
    outputs.push_back(command_line.export_options.out_dir);
  } else if (name == "config") {
    inputs = {command_line.config.config_path};
    documented_config(command_line.config.config_path, command_line.config.sets);
  }
  for (const std::string& input : inputs) {
    INFO("names '" << input << "', which is neither in the repository nor made by an earlier "
                   "line of the page");
    CHECK((input.empty() || input == "-" || files.known(input)));
  }
  for (const std::string& output : outputs) files.made(output);
}

}  // namespace

TEST_CASE("every minivit command line in README.md and docs/ parses and names real files",
          "[docs][commands]") {
  int checked = 0;
  for (const fs::path& page : user_pages()) {
    PageFiles files;
    for (const ShellLine& line : shell_lines(page)) {
      for (const std::vector<std::string>& words : simple_commands(line.text)) {
        INFO(fs::relative(page, kRoot).string() << ":" << line.line << ": " << line.text);
        // Past environment settings (MINIVIT_GEMM=avx2) and launchers (mpirun -np 2).
        auto program = std::find_if(words.begin(), words.end(), is_minivit);
        const bool launched = program != words.end() &&
                              std::all_of(words.begin(), program, [](const std::string& w) {
                                return w.find('=') != std::string::npos || w == "mpirun" ||
                                       w == "srun" || w.rfind("-", 0) == 0 ||
                                       (!w.empty() && std::isdigit(static_cast<unsigned char>(w[0])));
                              });
        if (!launched) {
          // Another program (a dataset script, cmake): the words it names count as made.
          for (const std::string& word : words) files.made(word);
          continue;
        }
        try {
          check_minivit_line(std::vector<std::string>(program + 1, words.end()), files);
        } catch (const minivit::Error& e) {
          FAIL_CHECK("its config does not load: " << e.what());
        }
        ++checked;
      }
    }
  }
  CHECK(checked >= 20);
}

TEST_CASE("every relative link in README.md, docs/ and experiments/ resolves", "[docs][links]") {
  std::vector<fs::path> pages = user_pages();
  for (const auto& entry : fs::recursive_directory_iterator(kRoot / "experiments"))
    if (entry.path().extension() == ".md") pages.push_back(entry.path());
  const std::regex link(R"(\]\(([^)\s]+)\))");
  int links = 0;
  for (const fs::path& page : pages) {
    const std::vector<std::string> lines = lines_of(read_text(page));
    bool in_code = false;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].rfind("```", 0) == 0) in_code = !in_code;
      if (in_code) continue;
      for (std::sregex_iterator it(lines[i].begin(), lines[i].end(), link), end; it != end; ++it) {
        std::string target = (*it)[1];
        if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0 ||
            target[0] == '#')
          continue;
        target = target.substr(0, target.find('#'));
        INFO(fs::relative(page, kRoot).string() << ":" << i + 1 << " links to " << target);
        CHECK(fs::exists(page.parent_path() / target));
        ++links;
      }
    }
  }
  CHECK(links >= 20);
}

TEST_CASE("README.md stays a front page, and config files open with a short comment",
          "[docs][configs]") {
  CHECK(lines_of(read_text(kRoot / "README.md")).size() <= 250);
  for (const auto& entry : fs::directory_iterator(kRoot / "configs")) {
    if (entry.path().extension() != ".toml") continue;
    INFO(fs::relative(entry.path(), kRoot).string()
         << ": at most 10 comment lines before the first key, linking its experiment log");
    int comment_lines = 0;
    std::string opening;
    for (const std::string& line : lines_of(read_text(entry.path()))) {
      if (!line.empty() && line[0] != '#') break;
      if (!line.empty()) ++comment_lines;
      opening += line + "\n";
    }
    CHECK(comment_lines <= 10);
    const std::smatch log = [&] {
      std::smatch match;
      std::regex_search(opening, match, std::regex(R"((experiments/[a-z0-9_]+/results\.md))"));
      return match;
    }();
    if (!log.empty()) CHECK(fs::exists(kRoot / log[1].str()));
  }
}
