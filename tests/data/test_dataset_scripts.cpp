// datasets/cifar10.sh and datasets/cifar100.sh, which check a user's download: what they
// say about missing or cut files, and that the keys they print for a complete one make a
// config minivit takes. The files are sparse, of the real sizes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"

using namespace minivit_test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

RunResult run_script(const std::string& script, const std::string& dir) {
  return run_command("bash " + std::string(MINIVIT_SOURCE_DIR) + "/datasets/" + script + " " + dir);
}

void make_sized(const fs::path& file, uintmax_t bytes) {
  fs::create_directories(file.parent_path());
  std::ofstream(file).close();
  fs::resize_file(file, bytes);
}

}  // namespace

TEST_CASE("datasets/cifar10.sh checks the six batch files and prints the keys for them",
          "[data][cifar][scripts]") {
  TempDir tmp("cifar10_script");
  const fs::path unpacked = tmp.path / "cifar-10-batches-bin";
  SECTION("an empty directory: every file named missing, where to get them, exit 1") {
    const RunResult r = run_script("cifar10.sh", tmp.str());
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("data_batch_1.bin: missing") && Contains("test_batch.bin: missing") &&
                          Contains("cifar-10-binary.tar.gz") &&
                          Contains("https://www.cs.toronto.edu/~kriz/cifar.html"));
    CHECK(r.out.empty());
  }
  for (int i = 1; i <= 5; ++i)
    make_sized(unpacked / ("data_batch_" + std::to_string(i) + ".bin"), 10000 * 3073);
  make_sized(unpacked / "test_batch.bin", 10000 * 3073);
  SECTION("complete, given the parent or the unpacked directory: the keys load as a config") {
    for (const std::string& dir : {tmp.str(), unpacked.string()}) {
      const RunResult r = run_script("cifar10.sh", dir);
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      CHECK_THAT(r.out, Contains("CIFAR-10 is complete"));
      const minivit::Config c = printed_config(r.out);
      CHECK(c.data.format == minivit::DataFormat::cifar10);
      CHECK(fs::equivalent(c.data.path, unpacked));
      CHECK(c.model.channels == 3);
      CHECK(c.data.mean.size() == 3);
    }
  }
  SECTION("a cut file is named with its size and the size expected") {
    fs::resize_file(unpacked / "data_batch_3.bin", 100);
    const RunResult r = run_script("cifar10.sh", tmp.str());
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("data_batch_3.bin: 100 bytes, expected 30730000 (10000 records "
                               "of 3073 bytes)"));
    CHECK_THAT(r.err, !Contains("data_batch_2.bin"));
  }
}

TEST_CASE("datasets/cifar100.sh checks train.bin and test.bin and prints the keys for them",
          "[data][cifar][scripts]") {
  TempDir tmp("cifar100_script");
  const fs::path unpacked = tmp.path / "cifar-100-binary";
  make_sized(unpacked / "train.bin", 50000 * 3074);
  SECTION("test.bin missing: named, exit 1") {
    const RunResult r = run_script("cifar100.sh", tmp.str());
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("test.bin: missing") && Contains("cifar-100-binary.tar.gz"));
    CHECK_THAT(r.err, !Contains("train.bin"));
  }
  SECTION("complete: the keys load as a config of 100 fine classes") {
    make_sized(unpacked / "test.bin", 10000 * 3074);
    const RunResult r = run_script("cifar100.sh", tmp.str());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const minivit::Config c = printed_config(r.out);
    CHECK(c.data.format == minivit::DataFormat::cifar100);
    CHECK(c.model.num_classes == 100);
    CHECK(fs::equivalent(c.data.path, unpacked));
  }
}
