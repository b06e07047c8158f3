// A process killed while writing a checkpoint must leave the previous file whole: every
// write goes to a temporary name and is renamed over the target only once complete.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <thread>

#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/formats/checkpoint.h"
#include "test_util.h"

using namespace minivit;
using minivit_test::TempDir;

TEST_CASE("SIGKILL during checkpoint writes never leaves an unreadable checkpoint",
          "[checkpoint][crash]") {
  TempDir dir("crash");
  Config config;
  config.model.dim = 128;  // about 1.2 M parameters: each write takes a few milliseconds
  config.model.mlp_dim = 512;
  config.model.heads = 4;
  ViT model(config.model);
  model.init(1);
  const std::vector<std::string> names = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
  const std::string path = dir.str("last.safetensors");
  TrainingProgress progress;
  save_checkpoint(path, model, config, names, progress);

  for (int round = 0; round < 12; ++round) {
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // The child rewrites the checkpoint with a new step number as fast as it can.
      TrainingProgress p;
      for (p.step = 1;; ++p.step) save_checkpoint(path, model, config, names, p);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(3 + 7 * round));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    // Whatever instant the kill hit, the checkpoint reads back whole, checksum included.
    Checkpoint ckpt = load_checkpoint(path);
    CHECK(ckpt.model->num_params == model.num_params);
    CHECK(std::equal(model.weights.begin(), model.weights.end(), ckpt.model->weights.begin()));
  }
}

TEST_CASE("stale temporary files of dead writers are cleaned up", "[checkpoint][crash]") {
  TempDir dir("stale");
  // A temporary file left by a process that no longer exists, and one of a live process.
  const std::string dead = dir.str("last.safetensors.tmp.999999999");
  const std::string live = dir.str("last.safetensors.tmp." + std::to_string(::getpid()));
  minivit_test::write_text(dead, "half");
  minivit_test::write_text(live, "in progress");
  minivit_test::write_text(dir.str("keep.txt"), "x");
  CHECK(remove_stale_temporaries(dir.str()) == 1);
  CHECK_FALSE(std::filesystem::exists(dead));
  CHECK(std::filesystem::exists(live));
  CHECK(std::filesystem::exists(dir.str("keep.txt")));
}
