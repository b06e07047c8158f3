// Replays the fuzz inputs kept in the repository through the same entry points as the
// libFuzzer targets (fuzz/fuzz_entry.h), in the ordinary build: the seeds in
// fuzz/corpus/<target>/ are valid files and must load; the inputs in
// fuzz/regressions/<target>/ once crashed a reader and must now load or be rejected with a
// minivit::Error.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../fuzz/fuzz_entry.h"
#include "minivit/core/error.h"

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

enum class Outcome { accepted, rejected, failed };

struct Replay {
  Outcome outcome;
  std::string message;  // the exception's, when one was thrown
};

// Runs one input; anything but acceptance or a minivit::Error is a failure.
Replay replay(const minivit_fuzz::Target& target, const fs::path& path) {
  try {
    target.run(bytes_of(path));
    return {Outcome::accepted, ""};
  } catch (const minivit::Error& e) {
    return {Outcome::rejected, e.what()};
  } catch (const std::exception& e) {
    return {Outcome::failed, e.what()};
  } catch (...) {
    return {Outcome::failed, "an exception that is not a std::exception"};
  }
}

}  // namespace

TEST_CASE("fuzz seeds load and fuzz regressions load or fail with minivit::Error", "[fuzz]") {
  const fs::path fuzz_dir = fs::path(MINIVIT_SOURCE_DIR) / "fuzz";
  for (const minivit_fuzz::Target& target : minivit_fuzz::kTargets) {
    DYNAMIC_SECTION(target.name) {
      const std::vector<fs::path> seeds = files_in(fuzz_dir / "corpus" / target.name);
      CHECK(!seeds.empty());
      for (const fs::path& seed : seeds) {
        Replay r = replay(target, seed);
        INFO(seed.string() << ": " << r.message);
        CHECK(r.outcome == Outcome::accepted);
      }
      for (const fs::path& input : files_in(fuzz_dir / "regressions" / target.name)) {
        Replay r = replay(target, input);
        INFO(input.string() << ": " << r.message);
        CHECK(r.outcome != Outcome::failed);
      }
    }
  }
}
