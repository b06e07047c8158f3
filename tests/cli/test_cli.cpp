// The minivit program as a user runs it: train on a small generated IDX dataset, then
// eval, info, resume, and the errors a user meets with bad input.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>
#include <tuple>

#include "minivit/formats/checkpoint.h"
#include "minivit/formats/safetensors.h"
#include "minivit/kernels/compute.h"
#include "test_util.h"

using namespace minivit_test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;


namespace {

// One dataset and one finished tiny run shared by the tests that only read it.
TinyTrainedRun& tiny_run() {
  static TinyTrainedRun run("cli_run", 8);
  return run;
}

}  // namespace

TEST_CASE("train writes the run directory of the contract and learns", "[cli][train]") {
  TinyTrainedRun& run = tiny_run();
  INFO(run.train.err);
  REQUIRE(run.train.exit_code == 0);
  for (const char* name : {"config.toml", "metrics.jsonl", "last.safetensors", "best.safetensors",
                           "resume.safetensors", "eval.json", "curves.png"})
    CHECK(fs::exists(fs::path(run.out) / name));
  const auto report = nlohmann::json::parse(read_text(run.out + "/eval.json"));
  CHECK(report["n"] == 96);
  CHECK(report["top1"].get<double>() > 0.8);  // chance is 0.25
  CHECK(report["confusion"].size() == 4);
  // metrics.jsonl: step lines every log_every steps and one line per epoch.
  int steps = 0, epochs = 0;
  std::istringstream lines(read_text(run.out + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    steps += j["type"] == "step";
    epochs += j["type"] == "epoch";
  }
  CHECK(epochs == 12);
  CHECK(steps == 12 * 16 / 5 + 1);  // 256 training images / batch 16 = 16 steps per epoch
  // The first line names the kernels the products run on.
  CHECK_THAT(run.train.err, Contains("fp32 products on " + minivit::Compute::automatic().kernels_name() +
                                     " | out "));
  // No temporary files left behind.
  for (const auto& entry : fs::directory_iterator(run.out))
    CHECK(entry.path().string().find(".tmp.") == std::string::npos);
}

TEST_CASE("eval on the written checkpoint reproduces the trainer's test accuracy", "[cli][eval]") {
  TinyTrainedRun& run = tiny_run();
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("eval");
  const RunResult r = run_minivit("eval --checkpoint " + run.out + "/last.safetensors --json " + tmp.str("e.json"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto trainer = nlohmann::json::parse(read_text(run.out + "/eval.json"));
  const auto eval = nlohmann::json::parse(read_text(tmp.str("e.json")));
  CHECK(eval["top1"].get<double>() == trainer["top1"].get<double>());
  CHECK(eval["loss"] == trainer["loss"]);
  CHECK(eval["confusion"] == trainer["confusion"]);
  CHECK_THAT(r.out, Contains("top-1") && Contains("confusion matrix"));
  // The validation split is the one best.safetensors was chosen on.
  const RunResult val = run_minivit("eval --checkpoint " + run.out + "/best.safetensors --split val");
  CHECK(val.exit_code == 0);
  CHECK_THAT(val.out, Contains("n 64"));
  // --threads overrides the checkpoint's train.threads; the answer does not depend on it.
  const RunResult one = run_minivit("eval --checkpoint " + run.out + "/last.safetensors --threads 1 --json " +
                                    tmp.str("one.json"));
  REQUIRE(one.exit_code == 0);
  const auto on_one = nlohmann::json::parse(read_text(tmp.str("one.json")));
  CHECK(on_one["top1"] == eval["top1"]);
  CHECK(on_one["loss"] == eval["loss"]);
  CHECK(on_one["confusion"] == eval["confusion"]);
  const RunResult many = run_minivit("eval --checkpoint " + run.out + "/last.safetensors --threads 5000");
  CHECK(many.exit_code != 0);
  CHECK_THAT(many.err, Contains("--threads") && Contains("5000"));
}

TEST_CASE("info describes a checkpoint", "[cli][info]") {
  TinyTrainedRun& run = tiny_run();
  REQUIRE(run.train.exit_code == 0);
  const RunResult r = run_minivit("info " + run.out + "/last.safetensors");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("step 192") && Contains("parameters:") && Contains("[model]") &&
                        Contains("checksum verified") &&
                        Contains("pos_embed learned, pool cls (5 tokens: CLS + 4 patches"));
}

TEST_CASE("checkpoints round-trip bit-exactly and carry their config", "[cli][checkpoint]") {
  TinyTrainedRun& run = tiny_run();
  REQUIRE(run.train.exit_code == 0);
  minivit::Checkpoint ckpt = minivit::load_checkpoint(run.out + "/last.safetensors");
  CHECK(ckpt.config.model.dim == 16);
  CHECK(ckpt.progress.step == 192);
  CHECK(ckpt.class_names == std::vector<std::string>{"0", "1", "2", "3"});
  TempDir tmp("roundtrip");
  minivit::save_checkpoint(tmp.str("copy.safetensors"), *ckpt.model, ckpt.config, ckpt.class_names, ckpt.progress);
  CHECK(tensor_values(tmp.str("copy.safetensors")) == tensor_values(run.out + "/last.safetensors"));
  CHECK(read_text(tmp.str("copy.safetensors")) == read_text(run.out + "/last.safetensors"));
}

TEST_CASE("a corrupted checkpoint is refused with a clear error", "[cli][checkpoint][errors]") {
  TinyTrainedRun& run = tiny_run();
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("corrupt");
  std::string bytes = read_text(run.out + "/last.safetensors");
  bytes[bytes.size() - 10] ^= 0x40;
  write_text(tmp.str("bad.safetensors"), bytes);
  RunResult r = run_minivit("eval --checkpoint " + tmp.str("bad.safetensors"));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("bad.safetensors") && Contains("checksum"));
  write_text(tmp.str("short.safetensors"), bytes.substr(0, bytes.size() / 2));
  r = run_minivit("info " + tmp.str("short.safetensors"));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("short.safetensors"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("train with --init loads weights and checks names and shapes", "[cli][init]") {
  TinyTrainedRun& run = tiny_run();
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("init");
  // Weights of a model with another width do not fit.
  write_text(tmp.str("wide.toml"), tiny_config_toml(run.data, tmp.str("wide")) );
  RunResult r = run_minivit("train --config " + tmp.str("wide.toml") + " --set model.dim=32 --set train.max_steps=2 --out " + tmp.str("wide"));
  REQUIRE(r.exit_code == 0);
  r = run_minivit("train --config " + run.config + " --init " + tmp.str("wide/last.safetensors") + " --out " + tmp.str("x"));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("cls_token") && Contains("[1,1,32]") && Contains("[1,1,16]"));
  CHECK(!fs::exists(tmp.str("x")));  // nor an empty run directory
  // A directory that was there before stays, with what it held.
  fs::create_directories(tmp.str("kept"));
  write_text(tmp.str("kept/notes.txt"), "mine");
  r = run_minivit("train --config " + run.config + " --init " + tmp.str("wide/last.safetensors") + " --out " + tmp.str("kept"));
  CHECK(r.exit_code == 1);
  CHECK(read_text(tmp.str("kept/notes.txt")) == "mine");
  // Fitting weights start the run: one step of SGD with lr -> 0 keeps them.
  r = run_minivit("train --config " + run.config + " --init " + run.out + "/last.safetensors --out " + tmp.str("y") +
                  " --set optim.name=sgd --set optim.lr=1e-30 --set optim.momentum=0 --set optim.weight_decay=0"
                  " --set optim.schedule=constant --set optim.warmup_steps=0 --set train.max_steps=1");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(tensor_values(tmp.str("y/last.safetensors")) == tensor_values(run.out + "/last.safetensors"));
}

TEST_CASE("resume names the first model key that differs and notes other changed keys",
          "[cli][resume]") {
  TinyTrainedRun& run = tiny_run();
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("resume_keys");
  fs::copy(run.out, tmp.str("r"), fs::copy_options::recursive);
  const std::string before = read_text(tmp.str("r/last.safetensors"));
  RunResult r = run_minivit("train --resume " + tmp.str("r") + " --set model.dim=32");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("resume.safetensors: the resume state was written for model.dim = 16, "
                             "but the config asks for 32"));
  CHECK(read_text(tmp.str("r/last.safetensors")) == before);
  // A finished run extended by an epoch with another learning rate: allowed, and said. The
  // thread count changes no weight, so it goes unremarked.
  r = run_minivit("train --resume " + tmp.str("r") +
                  " --set train.epochs=13 --set optim.lr=1e-4 --set train.threads=3");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("note: resuming with train.epochs = 13; the run was started with "
                             "train.epochs = 12") &&
                        Contains("note: resuming with optim.lr = "));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') > 2);
  CHECK_THAT(r.err, !Contains("note: resuming with train.out_dir"));
  CHECK_THAT(r.err, !Contains("note: resuming with train.threads"));
  CHECK(minivit::load_checkpoint(tmp.str("r/last.safetensors")).progress.epoch == 13);
}

TEST_CASE("bad input ends with one clear line and a non-zero exit", "[cli][errors]") {
  TinyTrainedRun& run = tiny_run();
  TempDir tmp("errors");
  SECTION("unknown config key, with file and line") {
    write_text(tmp.str("bad.toml"), "[model]\ndim = 64\nheads = 4\nwidht = 3\n");
    const RunResult r = run_minivit("train --config " + tmp.str("bad.toml"));
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("bad.toml:4") && Contains("widht"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  SECTION("impossible value") {
    const RunResult r = run_minivit("train --config " + run.config + " --set model.heads=3 --out " + tmp.str("o"));
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("model.heads") && Contains("16"));
  }
  SECTION("missing dataset") {
    const RunResult r = run_minivit("train --config " + run.config + " --set data.path=/nonexistent/fm --out " + tmp.str("o"));
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("/nonexistent/fm"));
    CHECK(!fs::exists(tmp.str("o")));  // the run directory it made went again
  }
  SECTION("dataset that does not fit the model") {
    const RunResult r = run_minivit("train --config " + run.config + " --set model.image_size=12 --out " + tmp.str("o"));
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("8x8") && Contains("model.image_size = 12"));
  }
  SECTION("an existing run is never overwritten by a new one") {
    REQUIRE(run.train.exit_code == 0);
    const std::string before = read_text(run.out + "/last.safetensors");
    const RunResult r = run_minivit("train --config " + run.config);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("--resume"));
    CHECK(read_text(run.out + "/last.safetensors") == before);
  }
  SECTION("missing checkpoint") {
    const RunResult r = run_minivit("eval --checkpoint " + tmp.str("none.safetensors"));
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Contains("none.safetensors"));
  }
  SECTION("a model larger than the machine's memory is refused before allocating") {
    const RunResult r = run_minivit("train --config " + run.config +
                                    " --set model.depth=4000 --set model.dim=4096 --out " + tmp.str("o"));
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("depth 4000") && Contains("GiB of memory"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  SECTION("no output file is left behind by a failed run") {
    run_minivit("train --config " + run.config + " --set data.path=/nonexistent --out " + tmp.str("o"));
    CHECK_FALSE(fs::exists(tmp.str("o/last.safetensors")));
  }
}

TEST_CASE("a run stopped by SIGTERM or killed by SIGKILL and resumed ends bit-identical to "
          "an uninterrupted run, augmentation included",
          "[cli][resume]") {
  const int signal_sent = GENERATE(SIGTERM, SIGKILL);
  INFO("signal " << signal_sent);
  TempDir tmp("resume");
  const std::string data = tmp.str("data");
  write_tiny_idx_dataset(data, 320, 32, 8, 4);
  write_text(tmp.str("a.toml"), tiny_config_toml(data, tmp.str("a")));
  // Every augmentation on, so that their draws must be restored too.
  const std::vector<std::string> sets = {"train.epochs=60", "data.crop_padding=2", "data.hflip=0.5",
                                         "data.erasing=0.25", "data.mixup=0.2", "data.cutmix=1.0",
                                         "data.mix_prob=0.5", "optim.ema_decay=0.95",
                                         "model.drop_path=0.1", "model.patch_drop=0.25"};
  std::string set_args;
  for (const std::string& set : sets) set_args += " --set " + set;
  RunResult full = run_minivit("train --config " + tmp.str("a.toml") + set_args);
  INFO(full.err);
  REQUIRE(full.exit_code == 0);

  // The same run, stopped part-way by a signal.
  const std::string out_b = tmp.str("b");
  std::vector<std::string> args = {"train", "--config", tmp.str("a.toml"), "--out", out_b};
  for (const std::string& set : sets) args.insert(args.end(), {"--set", set});
  const pid_t pid = spawn_minivit(args, tmp.str("b.err"));
  // Wait for the first epoch to be logged, then interrupt.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(out_b + "/metrics.jsonl") && read_text(out_b + "/metrics.jsonl").find("\"type\":\"epoch\"") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  kill(pid, signal_sent);
  int status = 0;
  waitpid(pid, &status, 0);
  INFO(read_text(tmp.str("b.err")));
  if (signal_sent == SIGKILL) {
    REQUIRE(WIFSIGNALED(status));  // no chance to save: resume starts from the last epoch
  } else {
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 128 + SIGTERM);  // stopped early, not finished
    CHECK_THAT(read_text(tmp.str("b.err")), Contains("--resume"));
  }
  const auto stopped = minivit::load_checkpoint(out_b + "/last.safetensors");
  CHECK(stopped.progress.step > 0);
  CHECK(stopped.progress.step < 60 * 16);

  RunResult resumed = run_minivit("train --resume " + out_b);
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(tensor_values(out_b + "/last.safetensors") == tensor_values(tmp.str("a/last.safetensors")));
  CHECK(tensor_values(out_b + "/resume.safetensors") == tensor_values(tmp.str("a/resume.safetensors")));
  CHECK(tensor_values(out_b + "/ema.safetensors") == tensor_values(tmp.str("a/ema.safetensors")));
  const auto eval_a = nlohmann::json::parse(read_text(tmp.str("a/eval.json")));
  const auto eval_b = nlohmann::json::parse(read_text(out_b + "/eval.json"));
  CHECK(eval_b["loss"] == eval_a["loss"]);
  CHECK(eval_b["confusion"] == eval_a["confusion"]);
}

TEST_CASE("a non-finite loss stops training with the step, the culprit and the usual causes, "
          "keeping the last good checkpoint",
          "[cli][nan]") {
  TempDir tmp("nan");
  const std::string data = tmp.str("data");
  write_tiny_idx_dataset(data, 320, 32, 8, 4);
  write_text(tmp.str("a.toml"), tiny_config_toml(data, tmp.str("a")));
  // A learning rate of 1e30 without clipping: the first update makes the weights ~1e30
  // and the next forward overflows.
  const std::string explode = " --set optim.lr=1e30 --set optim.clip_grad_norm=0";

  SECTION("before any checkpoint") {
    const RunResult r = run_minivit("train --config " + tmp.str("a.toml") + explode);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("minivit: error: step ") && Contains("no checkpoint was written yet") &&
                          Contains("optim.lr") && Contains("clip_grad_norm"));
    CHECK_FALSE(fs::exists(tmp.str("a/last.safetensors")));
  }
  SECTION("after a good epoch") {
    REQUIRE(run_minivit("train --config " + tmp.str("a.toml") + " --set train.epochs=1").exit_code == 0);
    const std::vector<float> good = tensor_values(tmp.str("a/last.safetensors"));
    const RunResult r = run_minivit("train --resume " + tmp.str("a") + " --set train.epochs=3" + explode);
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("first non-finite gradient in '") &&
                          Contains("the last good checkpoint is " + tmp.str("a/last.safetensors") +
                                   " (step 16)"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') >= 1);
    // Untouched, readable, finite.
    CHECK(tensor_values(tmp.str("a/last.safetensors")) == good);
    const auto last = minivit::load_checkpoint(tmp.str("a/last.safetensors"));
    CHECK(last.progress.step == 16);
  }
}

TEST_CASE("bench reports throughput and the kernels in use, and MINIVIT_GEMM picks them", "[cli]") {
  TempDir dir("cli_bench");
  const std::string config = dir.str("tiny.toml"), json = dir.str("bench.json");
  write_text(config, tiny_config_toml(dir.str("no_data_needed"), dir.str("run")));
  const std::string args = "bench --config " + config + " --steps 2 --warmup 1 --json " + json;

  RunResult r = run_minivit(args);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("img/s") && Contains("gemm kernels"));
  const auto j = nlohmann::json::parse(read_text(json));
  CHECK(j.at("train_img_per_s").get<double>() > 0);
  CHECK(j.at("eval_img_per_s").get<double>() > 0);
  CHECK(j.at("sgemm_gflops").get<double>() > 0);
  const std::string automatic = j.at("gemm_kernels");
  CHECK(j.at("precision") == "fp32");
  // bf16 products where the kernels chosen here have them (gemm.h), fp32 with a note elsewhere;
  // where they run, their rate on the sgemm line's product beside it.
  CHECK(j.at("bf16_gemm_gflops").is_null());
  CHECK_THAT(r.out, !Contains("bf16 "));
  {
    const RunResult bf16 = run_minivit(args + " --set train.precision=bf16");
    REQUIRE(bf16.exit_code == 0);
    const bool available = minivit::Compute::automatic().bf16_products();
    const auto jb = nlohmann::json::parse(read_text(json));
    CHECK(jb.at("precision") == (available ? "bf16" : "fp32"));
    CHECK((bf16.err.find("note: train.precision") == std::string::npos) == available);
    CHECK(jb.at("bf16_gemm_gflops").is_null() == !available);
    if (available) {
      const double rate = jb.at("bf16_gemm_gflops"), sgemm = jb.at("sgemm_gflops");
      CHECK(rate > 0);
      CHECK_THAT(bf16.out, Contains("GFLOP/s on the same product in bf16"));
      // The note that fp32 may train faster comes exactly when the bf16 rate is the lower.
      CHECK((bf16.err.find("note: bf16 products ran at") != std::string::npos) == (rate < sgemm));
    }
  }
  // The step's phases are disjoint parts of the timed steps: shares that add up to at most 1.
  CHECK_THAT(r.out, Contains("step phases: forward "));
  const auto& phases = j.at("phase_time_shares");
  double sum = 0.0;
  for (const char* phase : {"clear_grads", "forward", "backward", "update"}) {
    const double share = phases.at(phase).get<double>();
    CHECK(share >= 0.0);
    sum += share;
  }
  CHECK(phases.at("forward").get<double>() > 0.0);
  CHECK(phases.at("backward").get<double>() > 0.0);
  CHECK(sum <= 1.0 + 1e-9);

  setenv("MINIVIT_GEMM", "openblas", 1);
  r = run_minivit(args);
  REQUIRE(r.exit_code == 0);
  CHECK(nlohmann::json::parse(read_text(json)).at("gemm_kernels").get<std::string>().rfind(
            "OpenBLAS ", 0) == 0);
  // OpenBLAS has no bf16 products: asked for, they are said to run in fp32, and do.
  r = run_minivit(args + " --set train.precision=bf16");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("note: train.precision = \"bf16\": the products run on OpenBLAS") ||
                        Contains("note: train.precision = \"bf16\": this CPU has no AVX512_BF16"));
  CHECK(nlohmann::json::parse(read_text(json)).at("precision") == "fp32");

  // An unknown value is named on stderr and the automatic choice is made.
  setenv("MINIVIT_GEMM", "fastest", 1);
  r = run_minivit(args);
  unsetenv("MINIVIT_GEMM");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("MINIVIT_GEMM=fastest: expected auto, openblas, avx2, avx512 or amx"));
  CHECK(nlohmann::json::parse(read_text(json)).at("gemm_kernels") == automatic);

  // AMX tiles where the CPU has them: chosen automatically, and MINIVIT_GEMM=avx512 leaves
  // the bf16 products on AVX512_BF16; elsewhere MINIVIT_GEMM=amx is refused by name.
  setenv("MINIVIT_GEMM", "amx", 1);
  r = run_minivit(args);
  setenv("MINIVIT_GEMM", "avx512", 1);
  const RunResult avx512 = run_minivit(args);
  unsetenv("MINIVIT_GEMM");
  REQUIRE(r.exit_code == 0);
  if (minivit::cpu_runs(minivit::GemmKernels::amx)) {
    CHECK(automatic == "minivit AVX-512 + AMX");
    CHECK(r.err.find("MINIVIT_GEMM") == std::string::npos);
    CHECK(nlohmann::json::parse(read_text(json)).at("gemm_kernels") == "minivit AVX-512");
    CHECK(avx512.exit_code == 0);
  } else {
    CHECK_THAT(r.err, Contains("MINIVIT_GEMM=amx: this CPU has no AMX tiles usable here"));
  }
}

TEST_CASE("MINIVIT_ISA caps the layers' level and the kernels with it, as an older CPU", "[cli]") {
  TempDir dir("cli_bench_isa");
  const std::string config = dir.str("tiny.toml"), json = dir.str("bench.json");
  write_text(config, tiny_config_toml(dir.str("no_data_needed"), dir.str("run")));
  const std::string args = "bench --config " + config + " --steps 2 --warmup 1 --json " + json;
  // Runs bench under the given settings (nullptr: unset) and returns its JSON's setting.
  auto bench_with = [&](const char* isa, const char* gemm, RunResult& r) {
    isa ? setenv("MINIVIT_ISA", isa, 1) : unsetenv("MINIVIT_ISA");
    gemm ? setenv("MINIVIT_GEMM", gemm, 1) : unsetenv("MINIVIT_GEMM");
    r = run_minivit(args);
    unsetenv("MINIVIT_ISA");
    unsetenv("MINIVIT_GEMM");
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(read_text(json));
    return std::pair<std::string, std::string>(j.at("gemm_kernels"), j.at("layers_level"));
  };
  RunResult r;
  // Every CPU runs the baseline: OpenBLAS under the x86-64 layers, as on a CPU without AVX2.
  auto [kernels, level] = bench_with("x86-64", nullptr, r);
  CHECK(kernels.rfind("OpenBLAS ", 0) == 0);
  CHECK(level == "x86-64");
  CHECK_THAT(r.err, Contains("layers x86-64"));
  CHECK(r.err.find("MINIVIT_") == std::string::npos);
  // Kernels above the cap are refused by name, and the fastest under it taken.
  std::tie(kernels, level) = bench_with("x86-64", "avx2", r);
  CHECK(kernels.rfind("OpenBLAS ", 0) == 0);
  CHECK(level == "x86-64");
  if (minivit::cpu_runs(minivit::Isa::avx2)) {
    CHECK_THAT(r.err, Contains("MINIVIT_GEMM=avx2: these kernels need the AVX2 level, above "
                               "MINIVIT_ISA's x86-64; using OpenBLAS "));
    std::tie(kernels, level) = bench_with("avx2", nullptr, r);
    CHECK(kernels == "minivit AVX2");
    CHECK(level == "AVX2");
    // OpenBLAS's products under the AVX2 layers, which MINIVIT_GEMM alone cannot ask for.
    std::tie(kernels, level) = bench_with("avx2", "openblas", r);
    CHECK(kernels.rfind("OpenBLAS ", 0) == 0);
    CHECK(level == "AVX2");
  }
  // Without a cap OpenBLAS runs under the best layers the CPU has.
  std::tie(kernels, level) = bench_with(nullptr, "openblas", r);
  CHECK(level == minivit::isa_name(minivit::best_isa()));
  // An unknown word, or a level the CPU lacks, is named and the CPU's best level kept.
  const auto automatic = bench_with(nullptr, nullptr, r);
  CHECK(bench_with("sse4", nullptr, r) == automatic);
  CHECK_THAT(r.err, Contains("minivit: MINIVIT_ISA=sse4: expected auto, x86-64, avx2 or avx512; "
                             "the layers run at "));
  if (!minivit::cpu_runs(minivit::Isa::avx512)) {
    CHECK(bench_with("avx512", nullptr, r) == automatic);
    CHECK_THAT(r.err, Contains("MINIVIT_ISA=avx512: this CPU has no AVX-512"));
  }
}

// A bench option refused before any work: exit 1, one stderr line saying `message`, nothing
// on stdout, and no JSON written.
static void check_bench_refused(const RunResult& r, const std::string& message,
                                const std::string& json) {
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains(message));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.out.empty());
  CHECK_FALSE(fs::exists(json));
}

TEST_CASE("bench reports single-image latency, and --latency-images sets or skips it", "[cli]") {
  TempDir dir("cli_bench_latency");
  const std::string config = dir.str("tiny.toml"), json = dir.str("bench.json");
  write_text(config, tiny_config_toml(dir.str("no_data_needed"), dir.str("run")));
  const std::string args = "bench --config " + config + " --steps 1 --warmup 0 --json " + json;

  SECTION("measured: the line and the JSON agree, finite, positive, p99 at least the median") {
    const RunResult r = run_minivit(args + " --latency-images 300");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const std::regex line(
        "latency  batch 1, 1 thread: median ([0-9.]+) ms, p99 ([0-9.]+) ms over 300 images "
        "\\(forward only\\)\n");
    std::smatch m;
    INFO(r.out);
    REQUIRE(std::regex_search(r.out, m, line));
    const double printed_median = std::stod(m[1].str()), printed_p99 = std::stod(m[2].str());

    const auto j = nlohmann::json::parse(read_text(json));
    CHECK(j.at("latency_images").get<int>() == 300);
    const double median = j.at("latency_median_ms").get<double>();
    const double p99 = j.at("latency_p99_ms").get<double>();
    CHECK(std::isfinite(median));
    CHECK(std::isfinite(p99));
    CHECK(median > 0);
    CHECK(p99 >= median);
    // The line prints the JSON's figures to three decimals.
    CHECK(printed_median == Approx(median).margin(0.0006));
    CHECK(printed_p99 == Approx(p99).margin(0.0006));
  }

  SECTION("0 skips it: no line, no figures, latency_images 0") {
    const RunResult r = run_minivit(args + " --latency-images 0");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Contains("img/s"));
    CHECK_THAT(r.out, !Contains("latency"));
    const auto j = nlohmann::json::parse(read_text(json));
    CHECK(j.at("latency_images").get<int>() == 0);
    CHECK_FALSE(j.contains("latency_median_ms"));
    CHECK_FALSE(j.contains("latency_p99_ms"));
  }

  SECTION("--help names the option") {
    const RunResult r = run_minivit("bench --help");
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Contains("--latency-images") && Contains("99th percentile") &&
                          Contains("--latency-threads"));
  }

  SECTION("a negative count is an error naming the option, before any work, and no JSON") {
    const RunResult r = run_minivit(args + " --latency-images -1");
    check_bench_refused(r, "--latency-images: must be 0", json);
    CHECK_THAT(r.err, Contains("got -1"));
  }

  SECTION("--latency-threads 2: the line and the JSON name two threads") {
    const RunResult r = run_minivit(args + " --latency-images 50 --latency-threads 2");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Contains("latency  batch 1, 2 threads: median "));
    const auto j = nlohmann::json::parse(read_text(json));
    CHECK(j.at("latency_threads").get<int>() == 2);
    CHECK(j.at("latency_median_ms").get<double>() > 0);
  }

  SECTION("--latency-threads 0 is an error naming the option, before any work, and no JSON") {
    const RunResult r = run_minivit(args + " --latency-threads 0");
    check_bench_refused(r, "--latency-threads: must be at least 1, got 0", json);
  }
}

TEST_CASE("bench times the every-patch steps of train.unmasked_epochs on a line of their own",
          "[cli]") {
  TempDir dir("cli_bench_every_patch");
  const std::string config = dir.str("tiny.toml"), json = dir.str("bench.json");
  write_text(config, tiny_config_toml(dir.str("no_data_needed"), dir.str("run")));
  const std::string args = "bench --config " + config +
                           " --steps 1 --warmup 0 --latency-images 0 --json " + json +
                           " --set train.epochs=4 --set model.patch_drop=0.5";

  SECTION("ending on every patch: a second train line and its JSON figures") {
    const RunResult r = run_minivit(args + " --set train.unmasked_epochs=2");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Contains("ms/step on every patch (the last 2 epochs: train.unmasked_epochs)"));
    const auto j = nlohmann::json::parse(read_text(json));
    const double dropped_ips = j.at("train_img_per_s"), every_ips = j.at("train_every_patch_img_per_s");
    const double dropped_pct = j.at("train_percent_of_sgemm");
    const double every_pct = j.at("train_every_patch_percent_of_sgemm");
    REQUIRE(dropped_ips > 0);
    REQUIRE(every_ips > 0);
    // Both shares are over the same sgemm rate, so share / rate is the work of one image:
    // more with every patch than with half of them.
    CHECK(every_pct / every_ips > 1.5 * dropped_pct / dropped_ips);
  }
  SECTION("patch dropout to the end: one train line, no every-patch figures") {
    const RunResult r = run_minivit(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, !Contains("on every patch"));
    CHECK_FALSE(nlohmann::json::parse(read_text(json)).contains("train_every_patch_img_per_s"));
  }
}

TEST_CASE("bench --rounds measures every rate that many times and prints the best of each",
          "[cli]") {
  TempDir dir("cli_bench_rounds");
  const std::string config = dir.str("tiny.toml"), json = dir.str("bench.json");
  write_text(config, tiny_config_toml(dir.str("no_data_needed"), dir.str("run")));
  const std::string args = "bench --config " + config +
                           " --steps 1 --warmup 0 --latency-images 0 --json " + json +
                           " --set train.epochs=4 --set model.patch_drop=0.5"
                           " --set train.unmasked_epochs=2";

  SECTION("three rounds: the JSON's figures are the best of its rounds, the shares of the best") {
    const RunResult r = run_minivit(args + " --rounds 3 --set train.precision=bf16");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(read_text(json));
    CHECK(j.at("rounds").get<int>() == 3);
    const auto& each = j.at("each_round");
    REQUIRE(each.size() == 3);
    auto best = [&](const char* key) {
      double most = 0.0;
      for (const auto& round : each) most = std::max(most, round.at(key).get<double>());
      return most;
    };
    for (const char* key : {"train_img_per_s", "eval_img_per_s", "sgemm_gflops",
                            "train_every_patch_img_per_s"})
      CHECK(best(key) > 0);
    CHECK(j.at("train_img_per_s").get<double>() == best("train_img_per_s"));
    CHECK(j.at("eval_img_per_s").get<double>() == best("eval_img_per_s"));
    CHECK(j.at("sgemm_gflops").get<double>() == best("sgemm_gflops"));
    CHECK(j.at("train_every_patch_img_per_s").get<double>() == best("train_every_patch_img_per_s"));
    // Each percentage is of the best sgemm rate.
    const double sgemm = j.at("sgemm_gflops");
    CHECK(j.at("train_percent_of_sgemm").get<double>() ==
          Approx(100 * j.at("gflops").get<double>() / sgemm));
    CHECK(j.at("eval_percent_of_sgemm").get<double>() ==
          Approx(100 * j.at("eval_gflops").get<double>() / sgemm));
    const bool openblas = !j.at("openblas_sgemm_gflops").is_null() &&
                          j.at("gemm_kernels").get<std::string>().rfind("OpenBLAS", 0) != 0;
    if (openblas)
      CHECK(j.at("openblas_sgemm_gflops").get<double>() == best("openblas_sgemm_gflops"));
    if (j.at("precision") == "bf16") {  // where this CPU's kernels have bf16 products
      CHECK(j.at("bf16_gemm_gflops").get<double>() == best("bf16_gemm_gflops"));
      CHECK_THAT(r.out, Contains(", bf16 "));
    } else {
      CHECK(j.at("bf16_gemm_gflops").is_null());
      CHECK_FALSE(each[0].contains("bf16_gemm_gflops"));
    }
    // The ranges under the figures, each from its worst round to its best.
    const std::regex line("rounds 3, each line the best of them: train ([0-9.]+)-([0-9.]+) "
                          "img/s, on every patch [0-9.]+-[0-9.]+, eval [0-9.]+-[0-9.]+, sgemm "
                          "[0-9.]+-[0-9.]+ GFLOP/s");
    std::smatch m;
    INFO(r.out);
    REQUIRE(std::regex_search(r.out, m, line));
    CHECK(std::stod(m[1].str()) <= std::stod(m[2].str()));
    CHECK(std::stod(m[2].str()) == Approx(best("train_img_per_s")).margin(0.06));
  }
  SECTION("by default one round, and no line of ranges") {
    const RunResult r = run_minivit(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, !Contains("rounds"));
    const auto j = nlohmann::json::parse(read_text(json));
    CHECK(j.at("rounds").get<int>() == 1);
    REQUIRE(j.at("each_round").size() == 1);
    CHECK(j.at("each_round")[0].at("train_img_per_s") == j.at("train_img_per_s"));
  }
  SECTION("--help names the option") {
    const RunResult r = run_minivit("bench --help");
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Contains("--rounds") && Contains("the best of each"));
  }
  SECTION("fewer than one round is an error naming the option, before any work, and no JSON") {
    check_bench_refused(run_minivit(args + " --rounds 0"), "--rounds: must be at least 1, got 0",
                        json);
  }
}

TEST_CASE("bench --threads-sweep measures 1, 2, 4, ... threads up to the cores, one row each",
          "[cli]") {
  TempDir dir("cli_bench_sweep");
  const std::string config = dir.str("tiny.toml"), json = dir.str("sweep.json");
  write_text(config, tiny_config_toml(dir.str("no_data_needed"), dir.str("run")));
  const RunResult r = run_minivit("bench --config " + config +
                                  " --threads-sweep --rounds 2 --steps 1 --warmup 0 --latency-images 0 --json " +
                                  json);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("threads  train img/s  eval img/s  sgemm GFLOP/s"));
  const auto j = nlohmann::json::parse(read_text(json));
  CHECK(j.at("rounds").get<int>() == 2);  // the best of two at each count, one row each
  const int cores = j.at("cores");
  REQUIRE(cores >= 1);
  std::vector<int> expected;
  for (int t = 1; t < cores; t *= 2) expected.push_back(t);
  expected.push_back(cores);
  const auto& rows = j.at("threads_sweep");
  REQUIRE(rows.size() == expected.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i].at("threads").get<int>() == expected[i]);
    CHECK(rows[i].at("train_img_per_s").get<double>() > 0);
    CHECK(rows[i].at("eval_img_per_s").get<double>() > 0);
    CHECK(rows[i].at("sgemm_gflops").get<double>() > 0);
    CHECK(rows[i].at("train_percent_of_sgemm").get<double>() > 0);
    const double serial = rows[i].at("serial_time_share").get<double>();
    CHECK((serial >= 0.0 && serial <= 1.0));
    // One printed row per count, its thread count first.
    CHECK_THAT(r.out, Contains("\n" + std::string(7 - std::to_string(expected[i]).size(), ' ') +
                               std::to_string(expected[i]) + "  "));
  }
  CHECK_FALSE(j.contains("latency_median_ms"));
}

TEST_CASE("bench --loader times the config's own training batches beside the step, and names "
          "a missing dataset", "[cli]") {
  TempDir dir("cli_bench_loader");
  const std::string data = dir.str("data"), config = dir.str("tiny.toml"), json = dir.str("b.json");
  write_tiny_idx_dataset(data, 320, 96, 12, 4);
  write_text(config, tiny_config_toml(data, dir.str("run"), 12, 4));
  const RunResult r = run_minivit("bench --config " + config +
                                  " --loader --steps 2 --warmup 0 --latency-images 0 --json " + json);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // 320 images, the tiny config holds 20% out for validation: 256 in the training split.
  CHECK_THAT(r.out, Contains("img/s") && Contains("on one thread") &&
                        Contains("the training step's rate (" + data + ", 256 training images)"));
  const auto j = nlohmann::json::parse(read_text(json));
  CHECK(j.at("loader_img_per_s").get<double>() > 0);
  CHECK(j.at("loader_ms_per_batch").get<double>() > 0);

  // Without --loader no dataset is needed, and none is read.
  const RunResult plain = run_minivit("bench --config " + config + " --set data.path=" +
                                      dir.str("missing") + " --steps 1 --warmup 0 --latency-images 0");
  CHECK(plain.exit_code == 0);
  CHECK_THAT(plain.out, !Contains("loader"));
  const RunResult missing = run_minivit("bench --config " + config + " --set data.path=" +
                                        dir.str("missing") + " --loader --steps 1 --warmup 0 --latency-images 0");
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.err, Contains(dir.str("missing")));
}
