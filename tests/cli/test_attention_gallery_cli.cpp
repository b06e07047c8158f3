// `minivit attention` over many images: one explorer folder per image and a gallery with the
// misclassified images first, --count clamped to the split, several --image files, --class,
// and --stats over the images or a whole split. The explorer page carries attention.npy's
// numbers exactly (the browser test checks that it also draws them).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include <stb/stb_image_write.h>  // implementation compiled into the minivit libraries

#include "minivit/formats/npy.h"
#include "test_util.h"

using namespace minivit;
using namespace minivit_test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A tiny model trained briefly on 12x12 generated images (3x3 grid of patches, 4 classes), so that
// some test images are misclassified.
TinyTrainedRun& gallery_run() {
  static TinyTrainedRun run("gallery_run", 12, "--set train.epochs=1");
  return run;
}

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_text(path)); }

// The hrefs of the gallery's items, in page order.
std::vector<std::string> gallery_links(const std::string& html) {
  std::vector<std::string> links;
  const std::regex item("<a class=\"gallery-item[^\"]*\" href=\"([^\"]+)\"");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), item); it != std::sregex_iterator(); ++it)
    links.push_back((*it)[1]);
  return links;
}

std::string base64_decode(const std::string& text) {
  auto digit = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    const int d = digit(c);
    if (d < 0) continue;  // padding
    acc = acc << 6 | uint32_t(d);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xff);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("attention --count writes an explorer per image and a gallery, misclassified first",
          "[attention][cli][gallery]") {
  TinyTrainedRun& run = gallery_run();
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("gallery");
  const std::string out = tmp.str("g");
  const RunResult r = run_minivit("attention --checkpoint " + run.ckpt + " --count 6 --stats --out " + out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("6 images") && Contains("index.html"));

  const std::vector<std::string> links = gallery_links(read_text(out + "/index.html"));
  REQUIRE(links.size() == 6);
  bool seen_correct = false;
  int wrong = 0;
  for (const std::string& link : links) {
    const std::string dir = out + "/" + fs::path(link).parent_path().string();
    REQUIRE(fs::exists(out + "/" + link));
    CHECK(fs::exists(dir + "/thumb.png"));
    CHECK(read_npy(dir + "/grad_rollout.npy").shape == std::vector<int64_t>{3, 3});
    const nlohmann::json s = read_json(dir + "/summary.json");
    const bool misclassified = s["input"]["label_index"] != s["prediction"]["index"];
    CHECK_FALSE((misclassified && seen_correct));  // every misclassified one before the rest
    seen_correct = seen_correct || !misclassified;
    wrong += misclassified;
  }
  INFO(wrong << " of 6 misclassified");

  // stats.json: the mean over the six images of each image's statistics, recomputed here
  // from their attention.npy for layer 0, head 0.
  const nlohmann::json stats = read_json(out + "/stats.json");
  CHECK(stats["images"] == 6);
  CHECK(fs::exists(out + "/stats.png"));
  REQUIRE(stats["per_layer"].size() == 2);
  double distance = 0.0, entropy = 0.0;
  for (int n = 0; n < 6; ++n) {
    const NpyArray att = read_npy(out + "/test_0000" + std::to_string(n) + "/attention.npy");
    const int T = int(att.shape[2]), G = 3;  // CLS + 9 patches
    double d = 0.0, e = 0.0;
    for (int i = 0; i < T; ++i) {
      const float* row = att.values.data() + size_t(i) * T;  // layer 0, head 0
      for (int j = 0; j < T; ++j) e -= row[j] > 0 ? row[j] * std::log(double(row[j])) : 0.0;
      if (i == 0) continue;
      double weighted = 0.0, mass = 0.0;
      for (int j = 1; j < T; ++j) {
        weighted += row[j] * std::hypot(double((i - 1) / G - (j - 1) / G), double((i - 1) % G - (j - 1) % G));
        mass += row[j];
      }
      d += weighted / mass;
    }
    distance += d / (T - 1) / 6;
    entropy += e / T / 6;
  }
  CHECK(stats["per_layer"][0]["distance"][0].get<double>() == Approx(distance).epsilon(1e-5));
  CHECK(stats["per_layer"][0]["entropy"][0].get<double>() == Approx(entropy).epsilon(1e-5));
  CHECK_THAT(read_text(out + "/index.html"), Contains("stats.png"));
}

TEST_CASE("the explorer page embeds exactly the numbers attention.npy holds", "[attention][cli][gallery]") {
  TinyTrainedRun& run = gallery_run();
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("explorer_data");
  const std::string out = tmp.str("one");
  const RunResult r = run_minivit("attention --checkpoint " + run.ckpt + " --index 5 --class 2 --out " + out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string html = read_text(out + "/index.html");
  const std::string open = "<script type=\"application/json\" id=\"minivit-data\">";
  const size_t start = html.find(open);
  REQUIRE(start != std::string::npos);
  const size_t end = html.find("</script>", start);
  const nlohmann::json data = nlohmann::json::parse(html.substr(start + open.size(), end - start - open.size()));
  CHECK(data["format"] == "minivit-explorer-1");
  CHECK(data["explained_class"] == 2);
  CHECK(data["tokens"] == 10);
  const NpyArray att = read_npy(out + "/attention.npy");
  const std::string bytes = base64_decode(data["attention"].get<std::string>());
  REQUIRE(bytes.size() == att.values.size() * sizeof(float));
  CHECK(std::memcmp(bytes.data(), att.values.data(), bytes.size()) == 0);
  const NpyArray grad = read_npy(out + "/grad_rollout.npy");
  const std::string grad_bytes = base64_decode(data["grad_rollout"].get<std::string>());
  REQUIRE(grad_bytes.size() == grad.values.size() * sizeof(float));
  CHECK(std::memcmp(grad_bytes.data(), grad.values.data(), grad_bytes.size()) == 0);
  const nlohmann::json s = read_json(out + "/summary.json");
  CHECK(s["grad_rollout"]["class_index"] == 2);
  CHECK(s["grad_rollout"]["chosen_by"] == "--class");
}

TEST_CASE("attention --count beyond the split takes all of it and says so; --stats alone covers the split",
          "[attention][cli][gallery]") {
  TinyTrainedRun& run = gallery_run();
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("gallery_clamp");
  const RunResult r = run_minivit("attention --checkpoint " + run.ckpt + " --count 5000 --out " + tmp.str("all"));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("--count 5000") && Contains("96 images"));
  CHECK(gallery_links(read_text(tmp.str("all") + "/index.html")).size() == 96);

  const RunResult s = run_minivit("attention --checkpoint " + run.ckpt + " --stats --split val --out " + tmp.str("stats"));
  INFO(s.err);
  REQUIRE(s.exit_code == 0);
  const nlohmann::json stats = read_json(tmp.str("stats") + "/stats.json");
  CHECK(stats["images"] == 64);  // 20% of the 320 training images
  CHECK_THAT(stats["source"].get<std::string>(), Contains("val split"));
  for (const auto& layer : stats["per_layer"])
    for (size_t h = 0; h < layer["distance"].size(); ++h) {
      CHECK(layer["distance"][h].get<double>() >= 0.0);
      CHECK(layer["distance"][h].get<double>() <= std::hypot(2.0, 2.0));
      CHECK(layer["entropy"][h].get<double>() <= std::log(10.0) + 1e-9);
    }
  CHECK(gallery_links(read_text(tmp.str("stats") + "/index.html")).empty());
}

TEST_CASE("attention with several image files writes one folder each and a gallery", "[attention][cli][gallery]") {
  TinyTrainedRun& run = gallery_run();
  REQUIRE(run.train.exit_code == 0);
  TempDir tmp("gallery_files");
  std::vector<uint8_t> pixels(12 * 12);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint8_t(i * 7);
  REQUIRE(stbi_write_png(tmp.str("a shirt.png").c_str(), 12, 12, 1, pixels.data(), 12));
  REQUIRE(stbi_write_png(tmp.str("b.png").c_str(), 12, 12, 1, pixels.data(), 12));
  const RunResult r = run_minivit("attention --checkpoint " + run.ckpt + " --image '" + tmp.str("a shirt.png") +
                                  "' --image " + tmp.str("b.png") + " --out " + tmp.str("g"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> links = gallery_links(read_text(tmp.str("g") + "/index.html"));
  CHECK(links == std::vector<std::string>{"000_a_shirt/index.html", "001_b/index.html"});
  CHECK(fs::exists(tmp.str("g") + "/001_b/attention.npy"));

  // A missing file among them: an error, and nothing written.
  const RunResult bad = run_minivit("attention --checkpoint " + run.ckpt + " --image " + tmp.str("b.png") +
                                    " --image " + tmp.str("missing.png") + " --out " + tmp.str("h"));
  CHECK(bad.exit_code == 1);
  CHECK_THAT(bad.err, Contains("missing.png"));
  CHECK_FALSE(fs::exists(tmp.str("h")));
}
