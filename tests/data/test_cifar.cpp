// CIFAR-10 and CIFAR-100 binary loading: exact round trips of small files written in the
// official layout (every pixel plane and label), the directory forms the tarballs unpack
// into, every error a broken download gives, and a train + eval run on a tiny CIFAR-10.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "minivit/core/config.h"
#include "minivit/data/cifar.h"
#include "minivit/data/data.h"
#include "test_util.h"

using minivit::Cifar100Label;
using minivit_test::RunResult;
using minivit_test::run_minivit;
using minivit_test::error_of;
using minivit_test::TempDir;
using minivit_test::read_raw;
using minivit_test::write_gz;
using minivit_test::write_raw;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

constexpr int kRecords = 3;        // per file in the small layouts
constexpr int kTestIdBase = 1000;  // image ids of the test split

// A pixel value that differs between planes (85 apart), between (y, x) and (x, y), and
// between images, so a swapped plane, a transposed copy or a shifted record all show.
uint8_t pixel(int image, int c, int y, int x) {
  return static_cast<uint8_t>(image * 11 + c * 85 + y * 32 + x);
}

int cifar10_label(int image) { return (image * 7) % 10; }
int fine_label(int image) { return (image * 37 + 5) % 100; }
int coarse_label(int image) { return (image * 3 + 1) % 20; }

std::string pixels_of(int image) {
  std::string out;
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x) out.push_back(static_cast<char>(pixel(image, c, y, x)));
  return out;
}

std::string cifar10_records(int first_image, int n) {
  std::string out;
  for (int i = first_image; i < first_image + n; ++i)
    out += static_cast<char>(cifar10_label(i)) + pixels_of(i);
  return out;
}

std::string cifar100_records(int first_image, int n) {
  std::string out;
  for (int i = first_image; i < first_image + n; ++i) {
    out.push_back(static_cast<char>(coarse_label(i)));
    out.push_back(static_cast<char>(fine_label(i)));
    out += pixels_of(i);
  }
  return out;
}

// data_batch_1.bin .. data_batch_5.bin with images 0..14 in order, test_batch.bin with
// images 1000..1002. `ext` ".gz" writes them gzip-compressed.
void write_cifar10(const fs::path& dir, const std::string& ext = "") {
  fs::create_directories(dir);
  auto write = ext == ".gz" ? write_gz : write_raw;
  for (int b = 1; b <= 5; ++b)
    write((dir / ("data_batch_" + std::to_string(b) + ".bin" + ext)).string(),
          cifar10_records((b - 1) * kRecords, kRecords));
  write((dir / ("test_batch.bin" + ext)).string(), cifar10_records(kTestIdBase, kRecords));
}

void write_cifar100(const fs::path& dir) {
  fs::create_directories(dir);
  write_raw((dir / "train.bin").string(), cifar100_records(0, 2 * kRecords));
  write_raw((dir / "test.bin").string(), cifar100_records(kTestIdBase, kRecords));
}

// Checks every pixel of every plane and every label of `ds` against images first..first+n.
void check_images(const minivit::Dataset& ds, int first, int n,
                  const std::function<int(int)>& label_of) {
  REQUIRE(ds.size() == n);
  REQUIRE(ds.images.shape(0) == size_t(n));
  REQUIRE(ds.images.shape(1) == 3);
  REQUIRE(ds.images.shape(2) == 32);
  REQUIRE(ds.images.shape(3) == 32);
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    CHECK(ds.labels[size_t(i)] == label_of(first + i));
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) wrong += ds.images(i, c, y, x) != pixel(first + i, c, y, x);
  }
  CHECK(wrong == 0);
  // Spot checks by plane, so a failure says which ordering went wrong.
  CHECK(int(ds.images(0, 0, 0, 0)) == pixel(first, 0, 0, 0));   // R
  CHECK(int(ds.images(0, 1, 0, 0)) == pixel(first, 1, 0, 0));   // G
  CHECK(int(ds.images(0, 2, 0, 1)) == pixel(first, 2, 0, 1));   // B
  CHECK(int(ds.images(0, 0, 1, 0)) == pixel(first, 0, 1, 0));   // row-major: y before x
}

std::string cifar10_error(const fs::path& dir) {
  return error_of([&] { minivit::load_cifar10_dir(dir.string()); });
}

std::string cifar100_error(const fs::path& dir, Cifar100Label label = Cifar100Label::fine) {
  return error_of([&] { minivit::load_cifar100_dir(dir.string(), label); });
}

}  // namespace

TEST_CASE("cifar10 reads every pixel plane and label exactly, raw and gzip", "[data][cifar]") {
  TempDir tmp("cifar");
  std::string ext = GENERATE(std::string(""), std::string(".gz"));
  write_cifar10(tmp.path, ext);

  minivit::DataSplits s = minivit::load_cifar10_dir(tmp.str());
  // The five training batches in order, then the test batch.
  check_images(s.train, 0, 5 * kRecords, cifar10_label);
  check_images(s.test, kTestIdBase, kRecords, cifar10_label);
  for (const minivit::Dataset* d : {&s.train, &s.test}) {
    CHECK(d->num_classes == 10);  // fixed by the format though only some labels occur
    CHECK(d->class_names == std::vector<std::string>{"airplane", "automobile", "bird", "cat",
                                                     "deer", "dog", "frog", "horse", "ship",
                                                     "truck"});
  }
}

TEST_CASE("cifar10 takes class names from batches.meta.txt", "[data][cifar]") {
  TempDir tmp("cifar");
  write_cifar10(tmp.path);
  // As the tarball has it (trailing blank line), plus CRLF and stray spaces.
  minivit_test::write_text(tmp.str("batches.meta.txt"),
                           "n0\nn1\r\n  n2  \n\nn3\nn4\nn5\nn6\nn7\nn8\nlast name\n\n");
  minivit::DataSplits s = minivit::load_cifar10_dir(tmp.str());
  const std::vector<std::string> want = {"n0", "n1", "n2", "n3", "n4",
                                         "n5", "n6", "n7", "n8", "last name"};
  CHECK(s.train.class_names == want);
  CHECK(s.test.class_names == want);
}

TEST_CASE("cifar refuses class names that are not UTF-8, naming file and line", "[data][cifar]") {
  TempDir tmp("cifar");
  write_cifar10(tmp.path);
  minivit_test::write_text(tmp.str("batches.meta.txt"), "n0\nn1\nn2\nd\xE9j\xE0\nn4\nn5\nn6\nn7\nn8\nn9\n");
  REQUIRE_THROWS_WITH(minivit::load_cifar10_dir(tmp.str()),
                      Contains(tmp.str("batches.meta.txt")) && Contains("line 4") && Contains("not UTF-8"));
  // The same names written as UTF-8 load as they are.
  minivit_test::write_text(tmp.str("batches.meta.txt"), "n0\nn1\nn2\nd\xC3\xA9j\xC3\xA0\nn4\nn5\nn6\nn7\nn8\nn9\n");
  CHECK(minivit::load_cifar10_dir(tmp.str()).train.class_names[3] == "d\xC3\xA9j\xC3\xA0");
}

TEST_CASE("cifar10 and cifar100 accept the parent of the unpacked tarball", "[data][cifar]") {
  TempDir tmp("cifar");
  write_cifar10(tmp.path / "cifar-10-batches-bin");
  minivit_test::write_text(tmp.str("cifar-10-batches-bin/batches.meta.txt"),
                           "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n");
  minivit::DataSplits s10 = minivit::load_cifar10_dir(tmp.str());
  check_images(s10.train, 0, 5 * kRecords, cifar10_label);
  CHECK(s10.train.class_names.front() == "a");

  write_cifar100(tmp.path / "cifar-100-binary");
  minivit::DataSplits s100 = minivit::load_cifar100_dir(tmp.str(), Cifar100Label::fine);
  check_images(s100.train, 0, 2 * kRecords, fine_label);
}

TEST_CASE("cifar100 reads fine or coarse labels and every pixel exactly", "[data][cifar]") {
  TempDir tmp("cifar");
  write_cifar100(tmp.path);

  SECTION("fine") {
    minivit::DataSplits s = minivit::load_cifar100_dir(tmp.str(), Cifar100Label::fine);
    check_images(s.train, 0, 2 * kRecords, fine_label);
    check_images(s.test, kTestIdBase, kRecords, fine_label);
    CHECK(s.train.num_classes == 100);
    CHECK(s.test.num_classes == 100);
    REQUIRE(s.train.class_names.size() == 100);
    CHECK(s.train.class_names[0] == "apple");
    CHECK(s.train.class_names[99] == "worm");
  }
  SECTION("coarse") {
    minivit::DataSplits s = minivit::load_cifar100_dir(tmp.str(), Cifar100Label::coarse);
    check_images(s.train, 0, 2 * kRecords, coarse_label);
    check_images(s.test, kTestIdBase, kRecords, coarse_label);
    CHECK(s.train.num_classes == 20);
    REQUIRE(s.test.class_names.size() == 20);
    CHECK(s.test.class_names[0] == "aquatic_mammals");
    CHECK(s.test.class_names[19] == "vehicles_2");
  }
  SECTION("names from the label-name files") {
    std::string fine, coarse;
    for (int k = 0; k < 100; ++k) fine += "fine" + std::to_string(k) + "\n";
    for (int k = 0; k < 20; ++k) coarse += "coarse" + std::to_string(k) + "\n";
    minivit_test::write_text(tmp.str("fine_label_names.txt"), fine + "\n");
    minivit_test::write_text(tmp.str("coarse_label_names.txt"), coarse + "\n");
    CHECK(minivit::load_cifar100_dir(tmp.str(), Cifar100Label::fine).train.class_names[42] ==
          "fine42");
    CHECK(minivit::load_cifar100_dir(tmp.str(), Cifar100Label::coarse).test.class_names[13] ==
          "coarse13");
  }
  SECTION("through load_data, data.label picks the label") {
    minivit::DataConfig data;
    data.format = minivit::DataFormat::cifar100;
    data.path = tmp.str();
    data.label = Cifar100Label::coarse;
    minivit::DataSplits s = minivit::load_data(data, minivit::ModelConfig{});
    CHECK(s.train.num_classes == 20);
    CHECK(s.train.labels[1] == coarse_label(1));
    data.label = Cifar100Label::fine;
    CHECK(minivit::load_data(data, minivit::ModelConfig{}).train.labels[1] == fine_label(1));
  }
}

TEST_CASE("cifar refuses a missing or wrong directory, naming it", "[data][cifar]") {
  TempDir tmp("cifar");
  SECTION("missing directory") {
    std::string msg = cifar10_error(tmp.path / "nowhere");
    CHECK_THAT(msg, Contains(tmp.str("nowhere")) && Contains("no such directory") &&
                        Contains("data_batch_1.bin"));
    CHECK_THAT(cifar100_error(tmp.path / "nowhere"),
               Contains(tmp.str("nowhere")) && Contains("train.bin"));
  }
  SECTION("a file given as the directory") {
    minivit_test::write_text(tmp.str("file"), "x");
    CHECK_THAT(cifar10_error(tmp.path / "file"),
               Contains(tmp.str("file")) && Contains("not a directory"));
  }
  SECTION("the python version instead of the binary one") {
    minivit_test::write_text(tmp.str("data_batch_1"), "pickle");
    CHECK_THAT(cifar10_error(tmp.path),
               Contains("missing data_batch_1.bin") && Contains("python version") &&
                   Contains("cifar-10-binary.tar.gz"));
  }
}

TEST_CASE("cifar names a missing batch file", "[data][cifar]") {
  TempDir tmp("cifar");
  write_cifar10(tmp.path);
  write_cifar100(tmp.path / "c100");
  SECTION("a training batch") {
    fs::remove(tmp.path / "data_batch_3.bin");
    CHECK_THAT(cifar10_error(tmp.path),
               Contains(tmp.str()) && Contains("missing data_batch_3.bin"));
  }
  SECTION("the test batch") {
    fs::remove(tmp.path / "test_batch.bin");
    CHECK_THAT(cifar10_error(tmp.path), Contains("missing test_batch.bin"));
  }
  SECTION("the other CIFAR's directory") {
    CHECK_THAT(cifar100_error(tmp.path),
               Contains("missing train.bin") && Contains("data.format = \"cifar10\"?"));
    CHECK_THAT(cifar10_error(tmp.path / "c100"),
               Contains("missing data_batch_1.bin") && Contains("data.format = \"cifar100\"?"));
  }
  SECTION("cifar100 test.bin") {
    fs::remove(tmp.path / "c100/test.bin");
    CHECK_THAT(cifar100_error(tmp.path / "c100"),
               Contains(tmp.str("c100")) && Contains("missing test.bin"));
  }
}

TEST_CASE("cifar refuses a file that is not whole records, saying both sizes", "[data][cifar]") {
  TempDir tmp("cifar");
  write_cifar10(tmp.path);
  write_cifar100(tmp.path / "c100");
  SECTION("one byte too many") {
    std::string path = tmp.str("data_batch_2.bin");
    write_raw(path, cifar10_records(3, kRecords) + "x");
    CHECK_THAT(cifar10_error(tmp.path), Contains(path) && Contains("size 9220 bytes") &&
                                            Contains("3073-byte CIFAR-10 records") &&
                                            Contains("3 records and 1 byte over"));
  }
  SECTION("cut short") {
    std::string path = tmp.str("c100/train.bin");
    write_raw(path, cifar100_records(0, kRecords).substr(0, 3074 + 100));
    CHECK_THAT(cifar100_error(tmp.path / "c100"),
               Contains(path) && Contains("size 3174 bytes") && Contains("3074-byte"));
  }
  SECTION("CIFAR-100 records where CIFAR-10 ones belong") {
    std::string path = tmp.str("test_batch.bin");
    write_raw(path, cifar100_records(0, kRecords));
    CHECK_THAT(cifar10_error(tmp.path), Contains(path) && Contains("is this CIFAR-100?"));
  }
  SECTION("gzip whose content is not whole records") {
    std::string path = tmp.str("data_batch_5.bin.gz");
    fs::remove(tmp.path / "data_batch_5.bin");
    write_gz(path, cifar10_records(12, kRecords) + "xy");
    CHECK_THAT(cifar10_error(tmp.path),
               Contains(path) && Contains("decompressed size 9221 bytes") && Contains("3073"));
  }
  SECTION("gzip cut off mid-way") {
    std::string path = tmp.str("data_batch_5.bin.gz");
    fs::remove(tmp.path / "data_batch_5.bin");
    write_gz(tmp.str("whole.gz"), cifar10_records(12, kRecords));
    std::string gz = read_raw(tmp.str("whole.gz"));
    write_raw(path, gz.substr(0, gz.size() / 2));
    CHECK_THAT(cifar10_error(tmp.path), Contains(path) && Contains("gzip"));
  }
}

TEST_CASE("cifar refuses an empty batch file", "[data][cifar]") {
  TempDir tmp("cifar");
  write_cifar10(tmp.path);
  write_raw(tmp.str("test_batch.bin"), "");
  CHECK_THAT(cifar10_error(tmp.path),
             Contains(tmp.str("test_batch.bin")) && Contains("empty file") && Contains("3073"));
}

TEST_CASE("cifar refuses a label out of range, naming file, record and range", "[data][cifar]") {
  TempDir tmp("cifar");
  SECTION("cifar10") {
    write_cifar10(tmp.path);
    std::string path = tmp.str("data_batch_4.bin");
    std::string bytes = read_raw(path);
    bytes[1 * 3073] = 10;  // record 1's label byte
    write_raw(path, bytes);
    CHECK_THAT(cifar10_error(tmp.path), Contains(path) && Contains("record 1 ") &&
                                            Contains("label 10") && Contains("expected 0..9"));
  }
  SECTION("cifar100 fine") {
    write_cifar100(tmp.path);
    std::string path = tmp.str("test.bin");
    std::string bytes = read_raw(path);
    bytes[2 * 3074 + 1] = char(200);  // record 2's fine label byte
    write_raw(path, bytes);
    CHECK_THAT(cifar100_error(tmp.path), Contains(path) && Contains("record 2 ") &&
                                             Contains("fine label 200") &&
                                             Contains("expected 0..99"));
  }
  SECTION("cifar100 coarse, checked even when fine labels are used") {
    write_cifar100(tmp.path);
    std::string path = tmp.str("train.bin");
    std::string bytes = read_raw(path);
    bytes[0] = 20;  // record 0's coarse label byte
    write_raw(path, bytes);
    for (Cifar100Label label : {Cifar100Label::fine, Cifar100Label::coarse})
      CHECK_THAT(cifar100_error(tmp.path, label),
                 Contains(path) && Contains("record 0 ") && Contains("coarse label 20") &&
                     Contains("expected 0..19"));
  }
}

TEST_CASE("cifar refuses a directory or an unreadable file where a batch belongs",
          "[data][cifar]") {
  TempDir tmp("cifar");
  write_cifar10(tmp.path);
  SECTION("a directory") {
    fs::remove(tmp.path / "test_batch.bin");
    fs::create_directory(tmp.path / "test_batch.bin");
    CHECK_THAT(cifar10_error(tmp.path),
               Contains(tmp.str("test_batch.bin")) && Contains("is a directory"));
  }
  SECTION("unreadable") {
    std::string path = tmp.str("data_batch_1.bin");
    if (::geteuid() != 0) {
      REQUIRE(::chmod(path.c_str(), 0) == 0);
    } else {
      // Permissions do not stop root; a symlink that points at itself cannot be read by anyone.
      fs::remove(path);
      fs::create_symlink("data_batch_1.bin", path);
    }
    CHECK_THAT(cifar10_error(tmp.path), Contains(path) && Contains("cannot"));
  }
}

TEST_CASE("cifar refuses a class-names file with the wrong number of names", "[data][cifar]") {
  TempDir tmp("cifar");
  write_cifar10(tmp.path);
  SECTION("too few") {
    minivit_test::write_text(tmp.str("batches.meta.txt"), "a\nb\n\nc\nd\ne\nf\ng\nh\ni\n\n");
    CHECK_THAT(cifar10_error(tmp.path), Contains(tmp.str("batches.meta.txt")) &&
                                            Contains("9 class names, expected 10"));
  }
  SECTION("a directory") {
    fs::create_directory(tmp.path / "batches.meta.txt");
    CHECK_THAT(cifar10_error(tmp.path),
               Contains(tmp.str("batches.meta.txt")) && Contains("is a directory"));
  }
  SECTION("cifar100 names file") {
    write_cifar100(tmp.path / "c100");
    minivit_test::write_text(tmp.str("c100/coarse_label_names.txt"), "only\ntwo\n");
    CHECK_THAT(cifar100_error(tmp.path / "c100", Cifar100Label::coarse),
               Contains(tmp.str("c100/coarse_label_names.txt")) &&
                   Contains("2 class names, expected 20"));
  }
}

TEST_CASE("train and eval a tiny model on a CIFAR-10 directory", "[cli][cifar]") {
  TempDir tmp("cifar_cli");
  const fs::path data = tmp.path / "cifar-10-batches-bin";
  fs::create_directories(data);
  for (int b = 1; b <= 5; ++b)
    write_raw((data / ("data_batch_" + std::to_string(b) + ".bin")).string(),
              cifar10_records((b - 1) * 64, 64));
  write_raw((data / "test_batch.bin").string(), cifar10_records(kTestIdBase, 20));
  const std::vector<std::string> names = {"aardvark", "bison", "caribou", "dingo", "emu",
                                          "ferret",   "gecko", "heron",   "ibis",  "jackal"};
  std::string meta;
  for (const auto& n : names) meta += n + "\n";
  minivit_test::write_text((data / "batches.meta.txt").string(), meta + "\n");

  const std::string out = tmp.str("run");
  const std::string config =
      "[model]\nimage_size = 32\nchannels = 3\npatch_size = 8\ndim = 16\ndepth = 1\n"
      "heads = 2\nmlp_dim = 32\nnum_classes = 10\n\n"
      "[data]\nformat = \"cifar10\"\npath = \"" + tmp.str() + "\"\n"
      "mean = [0.5, 0.5, 0.5]\nstd = [0.25, 0.25, 0.25]\n\n"
      "[optim]\nname = \"adamw\"\nlr = 1e-2\n\n"
      "[train]\nepochs = 1\nbatch_size = 16\nseed = 1\nthreads = 2\nout_dir = \"" + out + "\"\n";
  minivit_test::write_text(tmp.str("cifar.toml"), config);

  const RunResult train = run_minivit("train --config " + tmp.str("cifar.toml"));
  INFO(train.err);
  REQUIRE(train.exit_code == 0);
  const RunResult eval = run_minivit("eval --checkpoint " + out + "/last.safetensors");
  INFO(eval.err);
  REQUIRE(eval.exit_code == 0);
  CHECK_THAT(eval.out, Contains("n 20"));
  for (const auto& n : names) CHECK_THAT(eval.out, Contains(n));

  // A broken data path fails before training, naming the file, and writes no run.
  fs::remove(data / "data_batch_4.bin");
  const RunResult broken =
      run_minivit("train --config " + tmp.str("cifar.toml") + " --out " + tmp.str("run2"));
  CHECK(broken.exit_code != 0);
  CHECK_THAT(broken.err, Contains("data_batch_4.bin"));
  CHECK_FALSE(fs::exists(tmp.path / "run2" / "last.safetensors"));
}
