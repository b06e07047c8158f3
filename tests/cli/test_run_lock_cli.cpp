// One owner per run directory, end to end: while a trainer runs, a second `minivit train`
// on its directory, new or --resume, is refused at once naming the holder's process id and
// leaves the directory as it was; once the holder is killed, --resume goes on.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "minivit/formats/checkpoint.h"
#include "test_util.h"

using namespace minivit_test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

TEST_CASE("a second trainer on a live trainer's directory is refused, naming its process",
          "[cli][lock]") {
  TempDir tmp("lock_cli");
  const std::string data = tmp.str("data");
  write_tiny_idx_dataset(data, 320, 32, 8, 4);
  write_text(tmp.str("a.toml"), tiny_config_toml(data, tmp.str("a")));
  const std::string out = tmp.str("run");
  const pid_t pid = spawn_minivit({"train", "--config", tmp.str("a.toml"), "--out", out, "--set",
                                   "train.epochs=100000", "--set", "train.threads=1"},
                                  tmp.str("first.err"));
  // Wait until the first epoch is saved, so the directory holds a run to resume.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline && !fs::exists(out + "/resume.safetensors"))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(fs::exists(out + "/resume.safetensors"));

  const std::string holder = "process " + std::to_string(pid);
  const RunResult again = run_minivit("train --config " + tmp.str("a.toml") + " --out " + out);
  CHECK(again.exit_code == 1);
  CHECK_THAT(again.err, Contains(out) && Contains(holder));
  const RunResult resume = run_minivit("train --resume " + out);
  CHECK(resume.exit_code == 1);
  CHECK_THAT(resume.err, Contains(holder));
  // The holder trained on undisturbed: it is still running.
  int status = 0;
  CHECK(waitpid(pid, &status, WNOHANG) == 0);

  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  // Its lock went with it: the run continues, here for a few more steps than it had.
  const int64_t step = minivit::load_checkpoint(out + "/last.safetensors").progress.step;
  const RunResult resumed =
      run_minivit("train --resume " + out + " --set train.max_steps=" + std::to_string(step + 3));
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK(minivit::load_checkpoint(out + "/last.safetensors").progress.step == step + 3);
}
