// The `attention` and `predict` commands: the files they write and their shapes, the same
// preprocessing for image files as for dataset images, clear refusals of bad input, and the
// class names and probabilities predict prints.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include <stb/stb_image.h>        // implementations are compiled into the minivit libraries
#include <stb/stb_image_write.h>

#include "minivit/core/error.h"
#include "minivit/data/data.h"
#include "minivit/data/idx.h"
#include "minivit/data/image_io.h"
#include "minivit/formats/npy.h"
#include "minivit/inspect/attention_maps.h"
#include "minivit/model/vit.h"
#include "test_util.h"

using namespace minivit;
using namespace minivit_test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A tiny model trained on 12x12 generated images (3x3 patches), shared by the CLI tests.
TinyTrainedRun& attention_run() {
  static TinyTrainedRun run("attn_run", 12, "--set train.epochs=4");
  return run;
}

struct PngSize {
  int width = 0, height = 0;
};
PngSize png_size(const std::string& path) {
  PngSize s;
  int channels = 0;
  if (!stbi_info(path.c_str(), &s.width, &s.height, &channels)) s = {};
  return s;
}

// Test image n of the tiny dataset as it lies in the file.
Image8 test_image(const TinyTrainedRun& run, int n) {
  const Dataset d = load_idx_pair(run.data + "/t10k-images-idx3-ubyte", run.data + "/t10k-labels-idx1-ubyte");
  Image8 img = Image8::from_shape({1, 12, 12});
  std::copy_n(d.images.data() + size_t(n) * 144, 144, img.data());
  return img;
}

}  // namespace

TEST_CASE("attention --index writes every file with the right shapes", "[attention][cli]") {
  TinyTrainedRun& run = attention_run();
  INFO(run.train.err);
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("attn_index");
  const std::string out = tmp.str("maps");
  const RunResult r = run_minivit("attention --checkpoint " + run.ckpt + " --index 0 --out " + out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("predicted") && Contains("index.html"));

  const NpyArray att = read_npy(out + "/attention.npy");
  REQUIRE(att.shape == std::vector<int64_t>{2, 2, 10, 10});
  for (size_t row = 0; row < att.values.size() / 10; ++row) {
    double s = 0.0;
    for (size_t j = 0; j < 10; ++j) s += att.values[row * 10 + j];
    REQUIRE(s == Approx(1.0).margin(1e-5));
  }
  const NpyArray rollout = read_npy(out + "/rollout.npy");
  CHECK(rollout.shape == std::vector<int64_t>{3, 3});
  // The input the model saw is the dataset image through training's normalisation.
  const NpyArray input = read_npy(out + "/input.npy");
  REQUIRE(input.shape == std::vector<int64_t>{1, 12, 12});
  CHECK(input.values == normalise_image(test_image(run, 0), {0.3f}, {0.3f}));

  const PngSize in = png_size(out + "/input.png");
  CHECK(in.width == 228);  // 12 px x 19, the first whole multiple >= 224
  CHECK(in.height == 228);
  const nlohmann::json s = nlohmann::json::parse(read_text(out + "/summary.json"));
  const std::string title = "CLS attention per layer and head: predicted " +
                            s["prediction"]["class"].get<std::string>() + " (" +
                            [&] {
                              char b[32];
                              std::snprintf(b, sizeof b, "%.1f%%", 100 * s["prediction"]["probability"].get<double>());
                              return std::string(b);
                            }() +
                            "), label " + s["input"]["label"].get<std::string>();
  const GridLayout g = grid_layout(2, 2, 3, 12, PoolKind::cls, title);
  const PngSize grid = png_size(out + "/grid.png");
  CHECK(grid.width == g.width);
  CHECK(grid.height == g.height);
  const PngSize roll = png_size(out + "/rollout.png");
  CHECK(roll.width >= 2 * 224);
  CHECK(roll.height >= 224);

  CHECK(s["prediction"]["top5"].size() == 4);  // 4 classes
  double total = 0.0;
  for (const auto& c : s["prediction"]["top5"]) total += c["probability"].get<double>();
  CHECK(total == Approx(1.0));
  CHECK(s["input"]["split"] == "test");
  CHECK(s["attention"].size() == 2);
  CHECK(s["attention"][1]["heads"].size() == 2);
  const auto& head = s["attention"][1]["heads"][0];
  CHECK(head["entropy"].get<double>() >= 0.0);
  CHECK(head["entropy"].get<double>() <= std::log(9.0) + 1e-9);
  CHECK(head["top_patches"].size() == 5);
  CHECK(head["top_patches"][0]["row"].get<int>() * 3 + head["top_patches"][0]["col"].get<int>() ==
        head["top_patches"][0]["patch"].get<int>());
  CHECK(s.contains("entropy_over"));
  CHECK(s["rollout"]["fusion"] == "mean");
  const std::string html = read_text(out + "/index.html");
  CHECK_THAT(html, Contains("minivit-explorer-1") && Contains(s["prediction"]["class"].get<std::string>()) &&
                       !Contains("__MINIVIT_DATA__"));
  CHECK(read_npy(out + "/grad_rollout.npy").shape == std::vector<int64_t>{3, 3});
  CHECK(s["grad_rollout"]["chosen_by"] == "prediction");
  CHECK(s["grad_rollout"]["class_index"] == s["prediction"]["index"]);
  for (const auto& entry : fs::directory_iterator(out))
    CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);
}

TEST_CASE("attention --image reads a PNG through the same preprocessing as --index", "[attention][cli]") {
  TinyTrainedRun& run = attention_run();
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("attn_image");
  const Image8 img = test_image(run, 5);
  REQUIRE(stbi_write_png(tmp.str("five.png").c_str(), 12, 12, 1, img.data(), 12));
  RunResult r = run_minivit("attention --checkpoint " + run.ckpt + " --image " + tmp.str("five.png") + " --out " +
                            tmp.str("a"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  r = run_minivit("attention --checkpoint " + run.ckpt + " --index 5 --out " + tmp.str("b") +
                  " --fusion max --discard 0.5");
  REQUIRE(r.exit_code == 0);
  CHECK(read_text(tmp.str("a/attention.npy")) == read_text(tmp.str("b/attention.npy")));
  CHECK(read_text(tmp.str("a/input.npy")) == read_text(tmp.str("b/input.npy")));
  const auto sb = nlohmann::json::parse(read_text(tmp.str("b/summary.json")));
  CHECK(sb["rollout"]["fusion"] == "max");
  CHECK(sb["rollout"]["discard"] == 0.5);

  // Any size and colour: an RGB JPEG-sized picture is converted and resized.
  std::vector<uint8_t> colour(30 * 40 * 3, 90);
  REQUIRE(stbi_write_png(tmp.str("rgb.png").c_str(), 30, 40, 3, colour.data(), 90));
  r = run_minivit("attention --checkpoint " + run.ckpt + " --image " + tmp.str("rgb.png") + " --out " + tmp.str("c"));
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(read_npy(tmp.str("c/input.npy")).shape == std::vector<int64_t>{1, 12, 12});
}

TEST_CASE("attention refuses bad input with one clear line", "[attention][cli][errors]") {
  TinyTrainedRun& run = attention_run();
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("attn_errors");
  const std::string base = "attention --checkpoint " + run.ckpt + " --out " + tmp.str("o");
  auto expect_error = [&](const std::string& args, const std::vector<std::string>& words) {
    const RunResult r = run_minivit(base + " " + args);
    INFO(args << "\n" << r.err);
    CHECK(r.exit_code == 1);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    for (const auto& w : words) CHECK_THAT(r.err, Contains(w));
  };
  expect_error("--image " + tmp.str("missing.png"), {"missing.png", "no such"});
  write_text(tmp.str("notes.txt"), "plain text");
  expect_error("--image " + tmp.str("notes.txt"), {"notes.txt", "image"});
  expect_error("--index 96", {"--index 96", "96 images"});
  expect_error("--split val --index 64", {"64 images"});  // 20% of 320 are validation
  expect_error("", {"--image", "--index"});
  expect_error("--index 0 --image " + tmp.str("notes.txt"), {"one of", "--image", "--index", "--count"});
  expect_error("--index 0 --count 3", {"one of"});
  expect_error("--count 0", {"--count 0", "at least 1"});
  expect_error("--index 0 --class 4", {"--class 4", "4 classes", "0 to 3"});
  expect_error("--index 0 --class -2", {"--class -2"});
  expect_error("--index 0 --fusion median", {"--fusion", "median"});
  expect_error("--index 0 --discard 1.5", {"--discard", "1.5"});
  expect_error("--image " + tmp.str("notes.txt") + " --split val", {"--split"});
  CHECK_FALSE(fs::exists(tmp.str("o")));  // nothing written for a bad input

  const RunResult r = run_minivit("attention --checkpoint " + tmp.str("none.safetensors") + " --index 0 --out " +
                                  tmp.str("o"));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("none.safetensors"));
}

TEST_CASE("predict prints class names and probabilities per image", "[attention][cli][predict]") {
  TinyTrainedRun& run = attention_run();
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("predict");
  const Dataset test = load_idx_pair(run.data + "/t10k-images-idx3-ubyte", run.data + "/t10k-labels-idx1-ubyte");
  std::string files;
  for (int n = 0; n < 8; ++n) {
    const std::string path = tmp.str("img" + std::to_string(n) + ".png");
    REQUIRE(stbi_write_png(path.c_str(), 12, 12, 1, test.images.data() + size_t(n) * 144, 12));
    files += " " + path;
  }
  const RunResult r = run_minivit("predict --checkpoint " + run.ckpt + " --topk 4" + files);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // Per image: its path, then "  probability  class" lines, most probable first.
  std::istringstream lines(r.out);
  int images = 0, correct = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    REQUIRE(line.find(tmp.str("img" + std::to_string(images) + ".png")) == 0);
    double sum = 0.0, last = 2.0;
    std::string top;
    for (int k = 0; k < 4; ++k) {
      REQUIRE(std::getline(lines, line));
      std::istringstream fields(line);
      double p;
      std::string name;
      fields >> p >> name;
      CHECK(p <= last);
      last = p;
      sum += p;
      if (k == 0) top = name;
    }
    CHECK(sum == Approx(1.0).margin(1e-3));
    correct += top == std::to_string(test.labels[size_t(images)]);
    ++images;
  }
  CHECK(images == 8);
  CHECK(correct >= 7);  // the run scores well above 80% on these images

  // --json: the same predictions, for scripts.
  const RunResult j = run_minivit("predict --checkpoint " + run.ckpt + " --topk 4 --json " +
                                  tmp.str("p.json") + files);
  REQUIRE(j.exit_code == 0);
  CHECK(j.out == r.out);
  const auto report = nlohmann::json::parse(read_text(tmp.str("p.json")));
  CHECK(report["checkpoint"] == run.ckpt);
  REQUIRE(report["predictions"].size() == 8);
  for (size_t n = 0; n < 8; ++n) {
    const auto& p = report["predictions"][n];
    CHECK(p["image"] == tmp.str("img" + std::to_string(n) + ".png"));
    REQUIRE(p["top"].size() == 4);
    double sum = 0.0;
    for (const auto& c : p["top"]) {
      sum += c["probability"].get<double>();
      CHECK(c["class"] == std::to_string(c["index"].get<int>()));  // this dataset names classes 0-3
    }
    CHECK(sum == Approx(1.0).margin(1e-6));
    CHECK(p["top"][0]["probability"].get<double>() >= p["top"][1]["probability"].get<double>());
  }

  // The same image gives the same answer as attention's summary.
  const RunResult a = run_minivit("attention --checkpoint " + run.ckpt + " --image " + tmp.str("img0.png") +
                                  " --out " + tmp.str("a"));
  REQUIRE(a.exit_code == 0);
  const auto s = nlohmann::json::parse(read_text(tmp.str("a/summary.json")));
  const RunResult one = run_minivit("predict --checkpoint " + run.ckpt + " --topk 1 " + tmp.str("img0.png"));
  char want[64];
  std::snprintf(want, sizeof want, "  %.4f  %s", s["prediction"]["probability"].get<double>(),
                s["prediction"]["class"].get<std::string>().c_str());
  CHECK_THAT(one.out, Contains(want));

  const RunResult bad = run_minivit("predict --checkpoint " + run.ckpt + " " + tmp.str("img0.png") + " " +
                                    tmp.str("nope.png"));
  CHECK(bad.exit_code == 1);
  CHECK_THAT(bad.err, Contains("nope.png"));
  CHECK(bad.out.empty());  // nothing printed before the bad file was found
  const RunResult help = run_minivit("predict --help");
  CHECK_THAT(help.out, Contains("--topk") && Contains("IMAGE"));
  const RunResult ahelp = run_minivit("attention --help");
  CHECK_THAT(ahelp.out, Contains("--fusion") && Contains("--discard") && Contains("--index"));
}
