// The model forms through the command line: a run with mean pooling and the fixed sincos2d
// table on a tiny generated dataset, then eval, attention, info and a refused resume.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "minivit/formats/checkpoint.h"
#include "minivit/formats/npy.h"
#include "minivit/formats/safetensors.h"
#include "minivit/model/params.h"
#include "test_util.h"

using namespace minivit_test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

// `eval` on the run's last checkpoint, from the checkpoint alone, gives the trainer's test
// figures (eval.json); returns eval's JSON.
static nlohmann::json check_eval_repeats_training(TempDir& dir, const std::string& out) {
  const RunResult eval =
      run_minivit("eval --checkpoint " + out + "/last.safetensors --json " + dir.str("e.json"));
  INFO(eval.err);
  REQUIRE(eval.exit_code == 0);
  const auto trained = nlohmann::json::parse(read_text(out + "/eval.json"));
  const auto evaluated = nlohmann::json::parse(read_text(dir.str("e.json")));
  CHECK(evaluated["top1"] == trained["top1"]);
  CHECK(evaluated["loss"] == trained["loss"]);
  return evaluated;
}

// Trains the tiny config for 20 steps on 12x12 grey images (3x3 patches of 4x4) with the
// model form `sets`; returns the run directory.
static std::string train_tiny_form(TempDir& dir, const std::string& sets) {
  const std::string data = dir.str("data"), out = dir.str("run"), config = dir.str("tiny.toml");
  write_tiny_idx_dataset(data, 320, 96, 12, 4);
  write_text(config, tiny_config_toml(data, out, 12, 4));
  const RunResult train =
      run_minivit("train --config " + config + " " + sets + " --set train.max_steps=20");
  INFO(train.err);
  REQUIRE(train.exit_code == 0);
  return out;
}

TEST_CASE("train, eval, attention and info with mean pooling and the sincos2d table",
          "[cli][forms]") {
  TempDir dir("forms_cli");
  const std::string out =
      train_tiny_form(dir, "--set model.pool=mean --set model.pos_embed=sincos2d");

  // The checkpoint: timm's avg-pool layout, and the table as it was written at init.
  const std::string last = out + "/last.safetensors";
  minivit::SafetensorsFile file = minivit::read_safetensors(last);
  CHECK(file.tensors.count("cls_token") == 0);
  CHECK(file.tensors.count("norm.weight") == 0);
  CHECK(file.tensors.at("fc_norm.weight").shape == std::vector<int64_t>{16});
  REQUIRE(file.tensors.at("pos_embed").shape == std::vector<int64_t>{1, 9, 16});
  std::vector<float> table(9 * 16);
  minivit::sincos_2d_table(table.data(), 9, 16, 3);
  CHECK(file.tensors.at("pos_embed").data == table);
  CHECK(file.metadata.at("minivit.model.pool") == "\"mean\"");
  CHECK(file.metadata.at("minivit.model.pos_embed") == "\"sincos2d\"");
  // Its optimizer moments never moved from zero.
  const minivit::Checkpoint ckpt = minivit::load_checkpoint(last);
  const minivit::ParamSpec* pos = ckpt.model->find("pos_embed");
  REQUIRE(pos);
  minivit::SafetensorsFile resume = minivit::read_safetensors(out + "/resume.safetensors");
  CHECK(resume.tensors.at("pos_embed").data == table);
  for (const char* moment : {"optimizer.m", "optimizer.v"}) {
    const std::vector<float>& values = resume.tensors.at(moment).data;
    for (int64_t i = pos->offset; i < pos->offset + pos->size; ++i) REQUIRE(values[size_t(i)] == 0.0f);
  }

  // eval rebuilds the same model from the checkpoint alone.
  CHECK(check_eval_repeats_training(dir, out)["n"] == 96);

  // attention: N x N maps without a CLS token, read as the mean of all token rows.
  const std::string maps = dir.str("maps");
  const RunResult attention = run_minivit("attention --checkpoint " + last + " --index 0 --out " + maps);
  INFO(attention.err);
  REQUIRE(attention.exit_code == 0);
  CHECK_THAT(attention.out, Contains("attention.npy [2, 2, 9, 9]"));
  for (const char* name : {"attention.npy", "rollout.npy", "input.npy", "input.png", "grid.png",
                           "rollout.png", "summary.json", "index.html"})
    CHECK(fs::exists(fs::path(maps) / name));
  const minivit::NpyArray att = minivit::read_npy(maps + "/attention.npy");
  REQUIRE(att.shape == std::vector<int64_t>{2, 2, 9, 9});
  for (size_t row = 0; row < att.values.size() / 9; ++row) {
    double sum = 0.0;
    for (size_t j = 0; j < 9; ++j) sum += att.values[row * 9 + j];
    REQUIRE(sum == Approx(1.0).margin(1e-5));
  }
  const minivit::NpyArray rollout = minivit::read_npy(maps + "/rollout.npy");
  CHECK(rollout.shape == std::vector<int64_t>{3, 3});
  double rollout_sum = 0.0;
  for (float v : rollout.values) rollout_sum += v;
  CHECK(rollout_sum == Approx(1.0).margin(1e-5));  // the mean row of a row-stochastic matrix
  const auto summary = nlohmann::json::parse(read_text(maps + "/summary.json"));
  CHECK(summary["pool"] == "mean");
  CHECK(summary["tokens"] == 9);
  CHECK_THAT(read_text(maps + "/index.html"), Contains("the mean of all tokens"));

  // info names the form.
  const RunResult info = run_minivit("info " + last);
  REQUIRE(info.exit_code == 0);
  CHECK_THAT(info.out, Contains("pos_embed sincos2d (fixed, not trained), pool mean") &&
                           Contains("9 tokens: the patches, no CLS token") &&
                           Contains("(144 of them fixed, never trained)") &&
                           Contains("pool = \"mean\"") && Contains("pos_embed = \"sincos2d\""));

  // Resuming under the other pooling is refused by name.
  const RunResult resumed = run_minivit("train --resume " + out + " --set model.pool=cls");
  CHECK(resumed.exit_code == 1);
  CHECK_THAT(resumed.err, Contains("written for model.pool = \"mean\", but the config asks for \"cls\""));
}

TEST_CASE("train, eval, info and resume with shifted patches", "[cli][forms]") {
  TempDir dir("shifted_cli");
  const std::string out = train_tiny_form(dir, "--set model.patch_embed=shifted");

  // The projection takes the image's channel and its four shifted copies.
  const std::string last = out + "/last.safetensors";
  const minivit::SafetensorsFile file = minivit::read_safetensors(last);
  CHECK(file.tensors.at("patch_embed.proj.weight").shape == std::vector<int64_t>{16, 5, 4, 4});
  CHECK(file.metadata.at("minivit.model.patch_embed") == "\"shifted\"");

  // eval rebuilds the same model, shifts included, from the checkpoint alone.
  check_eval_repeats_training(dir, out);

  const RunResult info = run_minivit("info " + last);
  REQUIRE(info.exit_code == 0);
  CHECK_THAT(info.out, Contains("patches of 4x4 pixels with their 4 diagonal shifts by half a patch") &&
                           Contains("patch_embed = \"shifted\""));

  // Resuming with plain patches is refused by name.
  const RunResult resumed = run_minivit("train --resume " + out + " --set model.patch_embed=linear");
  CHECK(resumed.exit_code == 1);
  CHECK_THAT(resumed.err,
             Contains("written for model.patch_embed = \"shifted\", but the config asks for \"linear\""));
}

TEST_CASE("train, eval, attention, info and resume with a conv stem", "[cli][forms]") {
  TempDir dir("conv_stem_cli");
  const std::string out =
      train_tiny_form(dir, "--set model.patch_embed=conv --set model.stem_channels=8");

  // Two stride-2 convolutions (12 -> 6 -> 3 pixels a side), then the 1x1 projection.
  const std::string last = out + "/last.safetensors";
  const minivit::SafetensorsFile file = minivit::read_safetensors(last);
  CHECK(file.tensors.at("patch_embed.stem.0.weight").shape == std::vector<int64_t>{8, 1, 3, 3});
  CHECK(file.tensors.at("patch_embed.stem.1.weight").shape == std::vector<int64_t>{16, 8, 3, 3});
  CHECK(file.tensors.at("patch_embed.proj.weight").shape == std::vector<int64_t>{16, 16, 1, 1});
  CHECK(file.metadata.at("minivit.model.patch_embed") == "\"conv\"");
  CHECK(file.metadata.at("minivit.model.stem_channels") == "8");

  // eval rebuilds the same model, stem included, from the checkpoint alone.
  check_eval_repeats_training(dir, out);

  // The tokens are still one per 4x4 patch, so the attention maps keep their grid.
  const std::string maps = dir.str("maps");
  const RunResult attention = run_minivit("attention --checkpoint " + last + " --index 0 --out " + maps);
  INFO(attention.err);
  REQUIRE(attention.exit_code == 0);
  CHECK(minivit::read_npy(maps + "/attention.npy").shape.back() == 10);  // CLS + 9 patches

  const RunResult info = run_minivit("info " + last);
  REQUIRE(info.exit_code == 0);
  CHECK_THAT(info.out,
             Contains("patches of 4x4 pixels through a conv stem of 2 stride-2 3x3 convolutions "
                      "(8, 16 channels)") &&
                 Contains("patch_embed = \"conv\"") && Contains("stem_channels = 8"));

  // Resuming continues the stem; other stem widths and plain patches are refused by name.
  const RunResult wider = run_minivit("train --resume " + out + " --set model.stem_channels=16");
  CHECK(wider.exit_code == 1);
  CHECK_THAT(wider.err, Contains("written for model.stem_channels = 8, but the config asks for 16"));
  const RunResult linear = run_minivit("train --resume " + out + " --set model.patch_embed=linear");
  CHECK(linear.exit_code == 1);
  CHECK_THAT(linear.err,
             Contains("written for model.patch_embed = \"conv\", but the config asks for \"linear\""));
  const RunResult resumed = run_minivit("train --resume " + out + " --set train.max_steps=30");
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK(minivit::read_safetensors(last).metadata.at("minivit.step") == "30");
}

TEST_CASE("train, eval, attention, info and resume with sequence pooling", "[cli][forms]") {
  TempDir dir("seq_pool_cli");
  const std::string out = train_tiny_form(dir, "--set model.pool=seq");

  // CCT's layout: `norm` on every token and the scores' projection; no CLS token.
  const std::string last = out + "/last.safetensors";
  const minivit::SafetensorsFile file = minivit::read_safetensors(last);
  CHECK(file.tensors.count("cls_token") == 0);
  CHECK(file.tensors.count("fc_norm.weight") == 0);
  CHECK(file.tensors.at("norm.weight").shape == std::vector<int64_t>{16});
  CHECK(file.tensors.at("attention_pool.weight").shape == std::vector<int64_t>{1, 16});
  CHECK(file.metadata.at("minivit.model.pool") == "\"seq\"");

  // eval rebuilds the same model from the checkpoint alone.
  check_eval_repeats_training(dir, out);

  // attention: N x N maps, read as the token rows weighted by the pooling weights, which
  // come as pool_weights.npy, and saying so.
  const std::string maps = dir.str("maps");
  const RunResult attention = run_minivit("attention --checkpoint " + last + " --index 0 --out " + maps);
  INFO(attention.err);
  REQUIRE(attention.exit_code == 0);
  CHECK(minivit::read_npy(maps + "/attention.npy").shape == std::vector<int64_t>{2, 2, 9, 9});
  const auto summary = nlohmann::json::parse(read_text(maps + "/summary.json"));
  CHECK(summary["pool"] == "seq");
  CHECK_THAT(summary["readout"].get<std::string>(), Contains("weighted by learned scores"));
  CHECK(minivit::read_npy(maps + "/pool_weights.npy").shape == std::vector<int64_t>{3, 3});
  CHECK(summary["pool_weights"]["top_patches"].size() == 5);

  const RunResult info = run_minivit("info " + last);
  REQUIRE(info.exit_code == 0);
  CHECK_THAT(info.out, Contains("9 tokens: the patches, no CLS token") &&
                           Contains("the head reads the tokens weighted by learned scores") &&
                           Contains("pool = \"seq\""));

  // Resuming under mean pooling is refused by name; under its own it goes on.
  const RunResult mean = run_minivit("train --resume " + out + " --set model.pool=mean");
  CHECK(mean.exit_code == 1);
  CHECK_THAT(mean.err, Contains("written for model.pool = \"seq\", but the config asks for \"mean\""));
  const RunResult resumed = run_minivit("train --resume " + out + " --set train.max_steps=30");
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK(minivit::read_safetensors(last).metadata.at("minivit.step") == "30");
}
