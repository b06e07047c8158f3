// Inputs that are streams: every file a command reads works from a pipe, a FIFO with a
// writer, /dev/stdin, process substitution and "-"; an endless, random or truncated stream
// ends in one clear error, quickly; a link planted where a temporary file goes is never
// followed.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stb/stb_image_write.h>  // the implementation is compiled into the minivit libraries
#include <string>

#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/formats/safetensors.h"
#include "test_util.h"

using namespace minivit_test;
namespace fs = std::filesystem;

namespace {

std::string quoted(const std::string& text) { return "'" + text + "'"; }

// Runs a bash command line whose own pipes and redirections reach minivit (run_command's
// </dev/null then applies to bash, not to what it runs).
RunResult run_bash(const std::string& script) {
  return run_command("bash -c " + quoted("set -o pipefail; " + script));
}

std::string exe() { return MINIVIT_EXE; }

TinyTrainedRun& stream_run() {
  static TinyTrainedRun run("streams", 8);
  return run;
}

// A PNG of the tiny model's size.
std::string write_png(const TempDir& dir) {
  std::vector<uint8_t> pixels(8 * 8);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint8_t(i * 4);
  const std::string path = dir.str("image.png");
  REQUIRE(stbi_write_png(path.c_str(), 8, 8, 1, pixels.data(), 8));
  return path;
}

// The first line of what `predict` printed for its first image: the top class.
std::string top_line(const std::string& out) {
  const size_t first = out.find('\n');
  const size_t second = out.find('\n', first + 1);
  return out.substr(first + 1, second - first - 1);
}

// Exit status 1 and a last line `minivit: error: ...` naming the input. (An endless read
// would never return; CTest's timeout ends such a test.)
void check_error(const RunResult& r, const std::string& name) {
  INFO(r.err);
  CHECK(r.exit_code == 1);
  std::string last = r.err;
  while (!last.empty() && last.back() == '\n') last.pop_back();
  last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
  CHECK(last.rfind("minivit: error: ", 0) == 0);
  CHECK(last.find(name) != std::string::npos);
}

}  // namespace

TEST_CASE("predict and attention read an image from a pipe, stdin, a FIFO and <(...)",
          "[cli][streams]") {
  TinyTrainedRun& run = stream_run();
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("stream_images");
  const std::string png = write_png(tmp);
  const std::string predict = exe() + " predict --checkpoint " + run.ckpt + " --topk 1 ";
  const RunResult by_name = run_minivit("predict --checkpoint " + run.ckpt + " --topk 1 " + png);
  REQUIRE(by_name.exit_code == 0);
  const std::string expected = top_line(by_name.out);

  const std::string fifo = tmp.str("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::string& script :
       {"cat " + png + " | " + predict + "-", "cat " + png + " | " + predict + "/dev/stdin",
        predict + "<(cat " + png + ")", predict + "- < " + png,
        "(cat " + png + " > " + fifo + " &); " + predict + fifo}) {
    INFO(script);
    const RunResult r = run_bash(script);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(top_line(r.out) == expected);
  }

  const RunResult attention =
      run_bash("cat " + png + " | " + exe() + " attention --checkpoint " + run.ckpt +
               " --image - --out " + tmp.str("attention"));
  INFO(attention.err);
  CHECK(attention.exit_code == 0);
  CHECK(fs::exists(tmp.str("attention/attention.npy")));
}

TEST_CASE("an endless, random or truncated image stream fails at once with one line",
          "[cli][streams][errors]") {
  TinyTrainedRun& run = stream_run();
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("stream_bad_images");
  const std::string png = write_png(tmp);
  const std::string predict = exe() + " predict --checkpoint " + run.ckpt + " ";
  for (const std::string& script :
       {predict + "/dev/zero", predict + "/dev/urandom", predict + "- < /dev/zero",
        "head -c 40 " + png + " | " + predict + "-",
        exe() + " attention --checkpoint " + run.ckpt + " --image /dev/zero --out " +
            tmp.str("a")}) {
    INFO(script);
    const RunResult r = run_bash(script);
    check_error(r, script.find("/dev/") != std::string::npos &&
                                    script.find("- <") == std::string::npos
                                ? "/dev/"
                                : "standard input");
  }
  CHECK(!fs::exists(tmp.str("a")));
}

TEST_CASE("checkpoints, --init and --config come through pipes and -", "[cli][streams]") {
  TinyTrainedRun& run = stream_run();
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("stream_checkpoints");

  const RunResult info_named = run_minivit("info " + run.ckpt);
  REQUIRE(info_named.exit_code == 0);
  const RunResult info_piped = run_bash("cat " + run.ckpt + " | " + exe() + " info -");
  INFO(info_piped.err);
  REQUIRE(info_piped.exit_code == 0);
  // The same description after the first line, which names the file.
  CHECK(info_piped.out.substr(info_piped.out.find('\n')) ==
        info_named.out.substr(info_named.out.find('\n')));

  const RunResult eval_named = run_minivit("eval --checkpoint " + run.ckpt);
  const RunResult eval_fifo = run_bash("mkfifo " + tmp.str("ckpt") + "; (cat " + run.ckpt +
                                       " > " + tmp.str("ckpt") + " &); " + exe() +
                                       " eval --checkpoint " + tmp.str("ckpt"));
  INFO(eval_fifo.err);
  REQUIRE(eval_fifo.exit_code == 0);
  CHECK(eval_fifo.out.find("top-1") != std::string::npos);
  CHECK(eval_fifo.out.substr(eval_fifo.out.find("top-1"), 40) ==
        eval_named.out.substr(eval_named.out.find("top-1"), 40));

  const std::string png = write_png(tmp);
  for (const std::string& script :
       {"cat " + run.ckpt + " | " + exe() + " predict --checkpoint - " + png,
        "cat " + run.ckpt + " | " + exe() + " predict --checkpoint /dev/stdin " + png,
        "cat " + run.ckpt + " | " + exe() + " attention --checkpoint - --image " + png +
            " --out " + tmp.str("attention"),
        "cat " + run.ckpt + " | " + exe() + " eval --checkpoint /dev/stdin",
        "cat " + run.config + " | " + exe() + " config --config /dev/stdin",
        "cat " + run.config + " | " + exe() + " export --config - --split test --out " +
            tmp.str("export")}) {
    INFO(script);
    const RunResult r = run_bash(script);
    INFO(r.err);
    CHECK(r.exit_code == 0);
  }
  CHECK(fs::exists(tmp.str("attention/index.html")));
  CHECK(fs::is_directory(tmp.str("export/test")));

  const RunResult config_piped =
      run_bash("cat " + run.config + " | " + exe() + " train --config - --set train.epochs=1 " +
               "--out " + tmp.str("from_stdin"));
  INFO(config_piped.err);
  CHECK(config_piped.exit_code == 0);
  CHECK(fs::exists(tmp.str("from_stdin/last.safetensors")));

  const RunResult init_piped =
      run_bash("cat " + run.ckpt + " | " + exe() + " train --config " + run.config +
               " --init - --set train.epochs=1 --out " + tmp.str("from_init"));
  INFO(init_piped.err);
  CHECK(init_piped.exit_code == 0);

  const RunResult two = run_bash("cat " + run.ckpt + " | " + exe() + " train --config - --init - " +
                                 "--out " + tmp.str("two"));
  check_error(two, "standard input (-) can be read once");
  CHECK(!fs::exists(tmp.str("two")));
}

TEST_CASE("an endless, random or truncated checkpoint or config stream fails at once",
          "[cli][streams][errors]") {
  TinyTrainedRun& run = stream_run();
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("stream_bad_checkpoints");
  const std::string truncated = "head -c 2000 " + run.ckpt + " | ";
  const std::string longer = "cat " + run.ckpt + " " + run.ckpt + " | ";
  struct Case {
    std::string script, names;
  };
  for (const Case& c : std::vector<Case>{
           {exe() + " info /dev/zero", "/dev/zero"},
           {exe() + " info /dev/urandom", "/dev/urandom"},
           {exe() + " eval --checkpoint /dev/zero", "/dev/zero"},
           {exe() + " predict --checkpoint /dev/urandom " + run.ckpt, "/dev/urandom"},
           {truncated + exe() + " info -", "truncated"},
           {longer + exe() + " info -", "more bytes follow"},
           {truncated + exe() + " train --config " + run.config + " --init - --out " +
                tmp.str("init"),
            "standard input"},
           {exe() + " train --config /dev/zero --out " + tmp.str("zero"), "/dev/zero"},
           {exe() + " train --config /dev/urandom --out " + tmp.str("random"), "/dev/urandom"},
           {exe() + " config --config - < /dev/zero", "standard input"}}) {
    INFO(c.script);
    const RunResult r = run_bash(c.script);
    check_error(r, c.names);
  }
  for (const char* dir : {"zero", "random"}) CHECK(!fs::exists(tmp.str(dir)));
}

TEST_CASE("a link planted at a temporary name is not followed", "[core][streams]") {
  TempDir tmp("planted_link");
  const std::string victim = tmp.str("victim.txt");
  write_text(victim, "keep me");
  const std::string target = tmp.str("out.json");
  // The name older versions used, and one beside it for each writer's random suffix.
  const std::string predictable = target + ".tmp." + std::to_string(::getpid());
  fs::create_symlink(victim, predictable);
  minivit::write_file_atomic(target, "{\"written\": true}\n");
  std::ifstream victim_in(victim), target_in(target);
  std::string victim_text((std::istreambuf_iterator<char>(victim_in)), {});
  std::string target_text((std::istreambuf_iterator<char>(target_in)), {});
  CHECK(victim_text == "keep me");
  CHECK(target_text == "{\"written\": true}\n");
  CHECK(fs::is_symlink(predictable));
  // Every temporary name is new: no two writes share one.
  CHECK(minivit::temporary_name(target) != minivit::temporary_name(target));
  CHECK(minivit::temporary_name(target).rfind(predictable + ".", 0) == 0);
}

TEST_CASE("a link planted at the run directory's lock file is refused, its target untouched",
          "[cli][streams][errors]") {
  TinyTrainedRun& run = stream_run();
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("planted_lock");
  const std::string victim = tmp.str("victim.txt");
  write_text(victim, "keep me");
  fs::create_directories(tmp.str("run"));
  fs::create_symlink(victim, tmp.str("run/.minivit.lock"));
  const RunResult r =
      run_minivit("train --config " + run.config + " --set train.epochs=1 --out " + tmp.str("run"));
  check_error(r, ".minivit.lock");
  std::ifstream victim_in(victim);
  std::string victim_text((std::istreambuf_iterator<char>(victim_in)), {});
  CHECK(victim_text == "keep me");
}

TEST_CASE("the stale-temporary sweep removes dead writers' files of both name forms",
          "[core][streams]") {
  TempDir tmp("sweep");
  // Process ids above the kernel's limit belong to no process.
  write_text(tmp.str("a.json.tmp.2147483646"), "old form");
  write_text(tmp.str("b.json.tmp.2147483646.abc123"), "new form");
  const std::string live = tmp.str("c.json.tmp." + std::to_string(::getpid()) + ".xyz789");
  write_text(live, "a live writer's");
  CHECK(minivit::remove_stale_temporaries(tmp.str()) == 2);
  CHECK(fs::exists(live));
}
