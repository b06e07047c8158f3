// The trainer's phases driven in-process on a tiny generated dataset: what setup plans and
// refuses, what a step and the end of an epoch leave behind, and a stop signal mid-run.
#include <csignal>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "minivit/core/error.h"
#include "minivit/formats/checkpoint.h"
#include "minivit/formats/config_file.h"
#include "minivit/train/trainer.h"
#include "test_util.h"

using namespace minivit;
using namespace minivit_test;
namespace fs = std::filesystem;

namespace {

// 320 training images, 20% of them for validation: 256 to train on, 16 steps of 16 an epoch.
struct TinyData {
  TempDir dir{"trainer"};
  std::string data = dir.str("data");
  TinyData() { write_tiny_idx_dataset(data, 320, 96, 8, 4); }

  TrainerOptions options(const std::string& out, const std::vector<std::string>& sets = {}) {
    const std::string config_path = dir.str("tiny.toml");
    write_text(config_path, tiny_config_toml(data, out));
    TrainerOptions options;
    options.config = load_config(config_path, sets);
    options.config_path = config_path;
    return options;
  }
};

std::vector<nlohmann::json> metrics_lines(const std::string& run_dir) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(read_text(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

}  // namespace

TEST_CASE("setup plans the steps from the training split and the config", "[trainer]") {
  TinyData tiny;
  Trainer by_epochs(tiny.options(tiny.dir.str("a")));
  CHECK(by_epochs.steps_per_epoch() == 16);
  CHECK(by_epochs.total_steps() == 12 * 16);
  CHECK(by_epochs.progress().step == 0);
  Trainer capped(tiny.options(tiny.dir.str("b"), {"train.max_steps=20"}));
  CHECK(capped.total_steps() == 20);
}

TEST_CASE("a step advances the progress and the epoch's running sums; the epoch's end saves "
          "and logs it",
          "[trainer]") {
  TinyData tiny;
  const std::string out = tiny.dir.str("run");
  Trainer trainer(tiny.options(out));
  trainer.step();
  CHECK(trainer.progress().step == 1);
  CHECK(trainer.progress().epoch_seen == 16);
  CHECK(trainer.progress().epoch_correct <= 16);
  CHECK(trainer.progress().epoch_loss_sum > 0.0);
  CHECK_FALSE(trainer.at_epoch_end());
  CHECK_FALSE(fs::exists(out + "/last.safetensors"));

  while (!trainer.at_epoch_end()) trainer.step();
  CHECK(trainer.progress().step == 16);
  trainer.end_of_epoch();
  CHECK(trainer.progress().epoch == 1);
  CHECK(trainer.progress().epoch_seen == 0);
  for (const char* name : {"last.safetensors", "best.safetensors", "resume.safetensors", "curves.png"})
    CHECK(fs::exists(out + "/" + name));
  CHECK(load_checkpoint(out + "/last.safetensors").progress.step == 16);
  const std::vector<nlohmann::json> lines = metrics_lines(out);
  REQUIRE_FALSE(lines.empty());
  CHECK(lines.back()["type"] == "epoch");
  CHECK(lines.back()["epoch"] == 1);
  CHECK(lines.back()["step"] == 16);
  CHECK(lines.back().contains("val_acc"));
  CHECK(lines.front()["type"] == "step");  // log_every = 5
  CHECK(lines.front()["step"] == 5);
}

TEST_CASE("an epoch cut short by max_steps is closed as that epoch, then the test split is "
          "evaluated",
          "[trainer]") {
  TinyData tiny;
  const std::string out = tiny.dir.str("run");
  Trainer trainer(tiny.options(out, {"train.max_steps=20"}));
  CHECK(trainer.run() == 0);
  CHECK(trainer.progress().step == 20);
  CHECK(trainer.progress().epoch == 2);
  std::vector<int64_t> epoch_steps;
  for (const nlohmann::json& line : metrics_lines(out))
    if (line["type"] == "epoch") epoch_steps.push_back(line["step"].get<int64_t>());
  CHECK(epoch_steps == std::vector<int64_t>{16, 20});
  CHECK(metrics_lines(out).back()["type"] == "test");
  const auto eval = nlohmann::json::parse(read_text(out + "/eval.json"));
  CHECK(eval["split"] == "test");
  CHECK(eval["step"] == 20);
  CHECK(eval["n"] == 96);
}

TEST_CASE("a stop signal ends the run after the current step, saved, and the run resumes",
          "[trainer]") {
  TinyData tiny;
  const std::string out = tiny.dir.str("run");
  {
    Trainer trainer(tiny.options(out, {"train.max_steps=20"}));
    trainer.step();
    std::raise(SIGTERM);
    CHECK(trainer.run() == 128 + SIGTERM);
    CHECK(trainer.progress().step == 1);
  }
  CHECK(load_checkpoint(out + "/last.safetensors").progress.step == 1);
  CHECK_FALSE(fs::exists(out + "/eval.json"));

  TrainerOptions resume = tiny.options(out, {"train.max_steps=20"});
  resume.resume_dir = out;
  Trainer resumed(std::move(resume));
  CHECK(resumed.progress().step == 1);
  CHECK(resumed.run() == 0);  // the earlier trainer's stop request is not inherited
  CHECK(resumed.progress().step == 20);
}

TEST_CASE("train.unmasked_epochs trains the last epochs on every patch; a run resumed in or "
          "before them repeats the whole run",
          "[trainer][patch_drop]") {
  TinyData tiny;  // 4 patches an image, 2 kept with patch dropout; 16 steps an epoch
  const std::vector<std::string> tail = {"train.epochs=3", "model.patch_drop=0.5",
                                         "train.unmasked_epochs=1"};
  const std::string whole = tiny.dir.str("whole");
  REQUIRE(Trainer(tiny.options(whole, tail)).run() == 0);
  const std::vector<float> weights = tensor_values(whole + "/last.safetensors");

  // Driven to `steps`, then stopped by a signal, which saves it.
  auto train_to = [&](const std::string& out, int64_t steps) {
    Trainer trainer(tiny.options(out, tail));
    while (trainer.progress().step < steps) {
      trainer.step();
      if (trainer.at_epoch_end()) trainer.end_of_epoch();
    }
    std::raise(SIGTERM);
    REQUIRE(trainer.run() == 128 + SIGTERM);
    REQUIRE(trainer.progress().step == steps);
  };
  auto resume = [&](const std::string& out, const std::vector<std::string>& sets) {
    TrainerOptions options = tiny.options(out, sets);
    options.resume_dir = out;
    REQUIRE(Trainer(std::move(options)).run() == 0);
    return tensor_values(out + "/last.safetensors");
  };
  SECTION("the tail is the run continued with patch dropout off") {
    const std::string split = tiny.dir.str("split");
    train_to(split, 32);
    CHECK(resume(split, {"train.epochs=3", "model.patch_drop=0.5"}) != weights);  // dropping
    const std::string off = tiny.dir.str("off");
    train_to(off, 32);
    CHECK(resume(off, {"train.epochs=3", "model.patch_drop=0"}) == weights);
  }
  SECTION("stopped inside the tail, resumed with the same config") {
    const std::string stopped = tiny.dir.str("stopped");
    train_to(stopped, 40);
    CHECK(resume(stopped, tail) == weights);
  }
}

TEST_CASE("setup refuses what cannot be trained, with the reason", "[trainer]") {
  TinyData tiny;
  const std::string out = tiny.dir.str("run");
  SECTION("a batch larger than the training split") {
    CHECK_THROWS_WITH(Trainer(tiny.options(out, {"train.batch_size=300"})),
                      "train.batch_size: 300 is larger than the 256 training images");
  }
  SECTION("resuming where no run was saved") {
    TrainerOptions options = tiny.options(out);
    options.resume_dir = tiny.dir.str("empty");
    fs::create_directories(options.resume_dir);
    CHECK_THROWS_WITH(Trainer(std::move(options)),
                      tiny.dir.str("empty/resume.safetensors") +
                          ": no resume state here; is --resume the run directory of an earlier "
                          "`minivit train`?");
  }
  SECTION("a new run into a run directory, or a resumed one already past its steps") {
    REQUIRE(Trainer(tiny.options(out, {"train.max_steps=16"})).run() == 0);
    CHECK_THROWS_WITH(Trainer(tiny.options(out)),
                      out + ": already holds a training run; continue it with --resume " + out +
                          " or choose another --out");
    TrainerOptions fewer = tiny.options(out, {"train.max_steps=10"});
    fewer.resume_dir = out;
    CHECK_THROWS_WITH(Trainer(std::move(fewer)),
                      out + "/resume.safetensors: the run is already at step 16, past the "
                            "configured 10 steps");
  }
}

TEST_CASE("with optim.ema_decay the trainer keeps, validates, saves and tests the weights' "
          "moving average beside the weights",
          "[trainer][ema]") {
  TinyData tiny;
  const std::string out = tiny.dir.str("run");
  Trainer trainer(tiny.options(out, {"train.max_steps=20", "optim.ema_decay=0.9"}));
  CHECK(trainer.run() == 0);
  const Checkpoint last = load_checkpoint(out + "/last.safetensors");
  const Checkpoint ema = load_checkpoint(out + "/ema.safetensors");
  CHECK(ema.progress.step == 20);
  CHECK(ema.config.optim.ema_decay == 0.9f);
  REQUIRE(ema.model->num_params == last.model->num_params);
  // An average of the path, not the end of it.
  int64_t differ = 0;
  for (int64_t i = 0; i < last.model->num_params; ++i)
    differ += ema.model->weights.data()[i] != last.model->weights.data()[i];
  CHECK(differ > last.model->num_params / 2);

  bool validated = false;
  for (const nlohmann::json& line : metrics_lines(out))
    if (line["type"] == "epoch") {
      validated = true;
      CHECK(line["val_acc_ema"].get<double>() >= 0.0);
      CHECK(line["val_acc_ema"].get<double>() <= 1.0);
      CHECK(line.contains("val_loss_ema"));
    }
  CHECK(validated);
  CHECK(ema.progress.val_top1 >= 0.0);  // the average's own validation accuracy
  CHECK(ema.progress.best_val_top1 < 0.0);  // not the weights' best, which it never had
  const nlohmann::json test_line = metrics_lines(out).back();
  CHECK(test_line["type"] == "test");
  CHECK(test_line["train_img_per_s"].get<double>() > 0.0);  // what the last line prints
  const auto eval = nlohmann::json::parse(read_text(out + "/eval.json"));
  CHECK(eval["ema"]["n"] == 96);
  CHECK(eval["ema"]["checkpoint"] == out + "/ema.safetensors");
  CHECK(eval["ema"]["top1"] == test_line["test_acc_ema"]);
  CHECK(eval["top1"] == test_line["test_acc"]);

  // Without the key there is no average and no ema.safetensors.
  const std::string plain = tiny.dir.str("plain");
  Trainer without(tiny.options(plain, {"train.max_steps=4"}));
  CHECK(without.run() == 0);
  CHECK_FALSE(fs::exists(plain + "/ema.safetensors"));
  CHECK_FALSE(nlohmann::json::parse(read_text(plain + "/eval.json")).contains("ema"));
}
