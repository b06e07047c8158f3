// IDX loading: exact round trips of small generated files (raw and gzip), every error a
// user can hit with a broken download, and the real Fashion-MNIST when it is installed.

#include <array>
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "minivit/data/idx.h"
#include "test_util.h"

using minivit_test::error_of;
using minivit_test::TempDir;
using minivit_test::write_gz;
using minivit_test::write_raw;
using Catch::Matchers::Contains;

namespace {

void put_be32(std::string& out, uint32_t v) {
  out.push_back(static_cast<char>(v >> 24));
  out.push_back(static_cast<char>(v >> 16));
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}

std::string idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims,
                      const std::vector<uint8_t>& payload) {
  std::string out;
  put_be32(out, magic);
  for (uint32_t d : dims) put_be32(out, d);
  out.append(payload.begin(), payload.end());
  return out;
}

void write_idx(const std::string& path, const std::string& bytes) {
  bool gz = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  if (gz)
    write_gz(path, bytes);
  else
    write_raw(path, bytes);
}

// N images of H x W whose pixels and labels are distinct enough to catch any reordering.
struct Sample {
  uint32_t n, h, w;
  std::vector<uint8_t> pixels;
  std::vector<uint8_t> labels;
  std::string images_file() const { return idx_bytes(0x803, {n, h, w}, pixels); }
  std::string labels_file() const { return idx_bytes(0x801, {n}, labels); }
};

Sample make_sample(uint32_t n, uint32_t h, uint32_t w, uint8_t num_classes) {
  Sample s{n, h, w, {}, {}};
  for (uint32_t i = 0; i < n * h * w; ++i) s.pixels.push_back(static_cast<uint8_t>(i * 7 + 3));
  // Descending labels, so n >= num_classes uses every class and order mistakes show.
  for (uint32_t i = 0; i < n; ++i)
    s.labels.push_back(static_cast<uint8_t>(num_classes - 1 - i % num_classes));
  return s;
}

void check_matches(const minivit::Dataset& ds, const Sample& s) {
  REQUIRE(ds.images.shape(0) == s.n);
  REQUIRE(ds.images.shape(1) == 1);
  REQUIRE(ds.images.shape(2) == s.h);
  REQUIRE(ds.images.shape(3) == s.w);
  REQUIRE(ds.size() == s.n);
  std::vector<uint8_t> got(ds.images.data(), ds.images.data() + ds.images.size());
  CHECK(got == s.pixels);
  // Row-major (N, 1, H, W): check one pixel by index too, so a transposed copy fails.
  CHECK(ds.images(s.n - 1, 0, s.h - 1, 0) == s.pixels[((s.n - 1) * s.h + (s.h - 1)) * s.w]);
  std::vector<int32_t> want_labels(s.labels.begin(), s.labels.end());
  CHECK(ds.labels == want_labels);
}

std::string pair_error(const std::string& images, const std::string& labels) {
  return error_of([&] { minivit::load_idx_pair(images, labels); });
}

const std::array<std::string, 4> kSplitFiles = {
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte"};

}  // namespace

TEST_CASE("idx pair round-trips raw and gzip files exactly", "[data][idx]") {
  TempDir dir("idx");
  Sample s = make_sample(5, 4, 3, 7);
  std::string ext = GENERATE(std::string(""), std::string(".gz"));
  write_idx(dir.str("img" + ext), s.images_file());
  write_idx(dir.str("lbl" + ext), s.labels_file());

  minivit::Dataset ds = minivit::load_idx_pair(dir.str("img" + ext), dir.str("lbl" + ext));
  check_matches(ds, s);
  CHECK(ds.num_classes == 7);  // labels 6,5,4,3,2
  CHECK(ds.class_names == std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6"});
}

TEST_CASE("idx reads a gzip payload larger than one read chunk", "[data][idx]") {
  // 5 MB of pixels is more than the first gzip buffer, so the growth path runs.
  TempDir dir("idx");
  Sample s = make_sample(100, 200, 250, 10);
  write_gz(dir.str("img.gz"), s.images_file());
  write_raw(dir.str("lbl"), s.labels_file());
  check_matches(minivit::load_idx_pair(dir.str("img.gz"), dir.str("lbl")), s);
}

TEST_CASE("idx rejects a wrong magic number, printing both in hex", "[data][idx]") {
  TempDir dir("idx");
  Sample s = make_sample(2, 2, 2, 2);
  write_raw(dir.str("lbl"), s.labels_file());

  SECTION("not an IDX file at all") {
    write_raw(dir.str("img"), "<!DOCTYPE html>\n<html></html>\n");
    std::string msg = pair_error(dir.str("img"), dir.str("lbl"));
    CHECK_THAT(msg, Contains(dir.str("img")));
    CHECK_THAT(msg, Contains("0x00000803"));
    CHECK_THAT(msg, Contains("0x3c21444f"));
  }
  SECTION("images and labels swapped") {
    write_raw(dir.str("img"), s.images_file());
    std::string msg = pair_error(dir.str("lbl"), dir.str("img"));
    CHECK_THAT(msg, Contains(dir.str("lbl")));
    CHECK_THAT(msg, Contains("expected 3 dims"));
    CHECK_THAT(msg, Contains("0x00000801"));
    CHECK_THAT(msg, Contains("labels file"));
  }
  SECTION("file shorter than a magic number") {
    write_raw(dir.str("img"), std::string("\0\0", 2));
    CHECK_THAT(pair_error(dir.str("img"), dir.str("lbl")), Contains("too short"));
  }
}

TEST_CASE("idx rejects truncated files", "[data][idx]") {
  TempDir dir("idx");
  Sample s = make_sample(6, 5, 5, 3);
  write_raw(dir.str("lbl"), s.labels_file());
  std::string full = s.images_file();
  std::string short_file = full.substr(0, full.size() - 10);

  SECTION("raw") {
    write_raw(dir.str("img"), short_file);
    std::string msg = pair_error(dir.str("img"), dir.str("lbl"));
    CHECK_THAT(msg, Contains(dir.str("img")));
    CHECK_THAT(msg, Contains("truncated: header says 6 images of 5x5"));
    CHECK_THAT(msg, Contains("file holds 140 bytes of pixel data"));
  }
  SECTION("gzip of a short file") {
    write_gz(dir.str("img.gz"), short_file);
    std::string msg = pair_error(dir.str("img.gz"), dir.str("lbl"));
    CHECK_THAT(msg, Contains("truncated: header says 6 images of 5x5"));
    CHECK_THAT(msg, Contains("file holds 140 bytes of pixel data"));
  }
  SECTION("gzip stream cut off mid-way") {
    // Incompressible pixels, so cutting the compressed file also cuts the pixel data.
    Sample big = make_sample(50, 28, 28, 10);
    uint32_t x = 12345;
    for (uint8_t& p : big.pixels) p = static_cast<uint8_t>((x = x * 1103515245 + 12345) >> 24);
    write_gz(dir.str("whole.gz"), big.images_file());
    std::ifstream in(dir.str("whole.gz"), std::ios::binary);
    std::string gz(std::istreambuf_iterator<char>(in), {});
    write_raw(dir.str("img.gz"), gz.substr(0, gz.size() / 2));
    write_raw(dir.str("lbl50"), big.labels_file());
    std::string msg = pair_error(dir.str("img.gz"), dir.str("lbl50"));
    CHECK_THAT(msg, Contains(dir.str("img.gz")));
    CHECK_THAT(msg, Contains("truncated: header says 50 images of 28x28"));
  }
  SECTION("labels") {
    std::string labels = s.labels_file();
    write_raw(dir.str("img"), full);
    write_raw(dir.str("lbl_short"), labels.substr(0, labels.size() - 1));
    std::string msg = pair_error(dir.str("img"), dir.str("lbl_short"));
    CHECK_THAT(msg, Contains(dir.str("lbl_short")));
    CHECK_THAT(msg, Contains("truncated: header says 6 labels"));
    CHECK_THAT(msg, Contains("file holds 5 bytes of label data"));
  }
  SECTION("header itself cut off") {
    write_raw(dir.str("img"), full.substr(0, 9));
    CHECK_THAT(pair_error(dir.str("img"), dir.str("lbl")), Contains("truncated IDX header"));
  }
}

TEST_CASE("idx rejects trailing bytes after the data", "[data][idx]") {
  TempDir dir("idx");
  Sample s = make_sample(3, 2, 2, 3);
  write_raw(dir.str("lbl"), s.labels_file());
  std::string ext = GENERATE(std::string(""), std::string(".gz"));
  write_idx(dir.str("img" + ext), s.images_file() + "junk!");
  std::string msg = pair_error(dir.str("img" + ext), dir.str("lbl"));
  CHECK_THAT(msg, Contains(dir.str("img" + ext)));
  CHECK_THAT(msg, Contains("5 unexpected trailing bytes"));
}

TEST_CASE("idx rejects corrupt gzip data", "[data][idx]") {
  TempDir dir("idx");
  Sample s = make_sample(20, 8, 8, 4);
  write_gz(dir.str("whole.gz"), s.images_file());
  write_raw(dir.str("lbl"), s.labels_file());
  std::ifstream in(dir.str("whole.gz"), std::ios::binary);
  std::string gz(std::istreambuf_iterator<char>(in), {});
  // Flip bits in the deflate data, past the 10-byte gzip header.
  for (size_t i = 20; i < gz.size() - 8; i += 7) gz[i] = static_cast<char>(gz[i] ^ 0x5a);
  write_raw(dir.str("img.gz"), gz);
  std::string msg = pair_error(dir.str("img.gz"), dir.str("lbl"));
  CHECK_THAT(msg, Contains(dir.str("img.gz")));
}

TEST_CASE("idx rejects zero dims", "[data][idx]") {
  TempDir dir("idx");
  write_raw(dir.str("img"), idx_bytes(0x803, {4, 0, 28}, {}));
  write_raw(dir.str("lbl"), idx_bytes(0x801, {4}, {0, 1, 2, 3}));
  CHECK_THAT(pair_error(dir.str("img"), dir.str("lbl")), Contains("zero dimension"));
}

TEST_CASE("idx rejects an image/label count mismatch naming both files", "[data][idx]") {
  TempDir dir("idx");
  Sample s = make_sample(4, 2, 2, 2);
  Sample fewer = make_sample(3, 2, 2, 2);
  write_raw(dir.str("img"), s.images_file());
  write_raw(dir.str("lbl"), fewer.labels_file());
  std::string msg = pair_error(dir.str("img"), dir.str("lbl"));
  CHECK_THAT(msg, Contains(dir.str("img") + " holds 4 images"));
  CHECK_THAT(msg, Contains(dir.str("lbl") + " holds 3 labels"));
}

// The error names the header's claim against the file's size, which the loader can only
// say before allocating for the claim.
TEST_CASE("idx refuses a header claiming far more data than the file holds",
          "[data][idx]") {
  TempDir dir("idx");
  write_raw(dir.str("lbl"), idx_bytes(0x801, {1}, {0}));

  SECTION("raw") {
    write_raw(dir.str("img"), idx_bytes(0x803, {4000000000u, 28, 28}, {1, 2, 3}));
    std::string msg = pair_error(dir.str("img"), dir.str("lbl"));
    CHECK_THAT(msg, Contains("header says 4000000000 images of 28x28"));
    CHECK_THAT(msg, Contains("file holds 3 bytes"));
  }
  SECTION("gzip beyond what deflate can expand to") {
    write_gz(dir.str("img.gz"), idx_bytes(0x803, {4000000000u, 28, 28}, {1, 2, 3}));
    std::string msg = pair_error(dir.str("img.gz"), dir.str("lbl"));
    CHECK_THAT(msg, Contains("header says 4000000000 images of 28x28"));
    CHECK_THAT(msg, Contains("can hold at most"));
  }
  SECTION("gzip within the deflate bound but still short") {
    // 64 incompressible images make a ~50 KB gzip file, which could hold 60000 images
    // under the 1032x bound, so the loader must find out by reading.
    std::vector<uint8_t> noise(64 * 28 * 28);
    uint32_t x = 777;
    for (uint8_t& p : noise) p = static_cast<uint8_t>((x = x * 1103515245 + 12345) >> 24);
    write_gz(dir.str("img.gz"), idx_bytes(0x803, {60000, 28, 28}, noise));
    std::string msg = pair_error(dir.str("img.gz"), dir.str("lbl"));
    CHECK_THAT(msg, Contains("truncated: header says 60000 images of 28x28"));
    CHECK_THAT(msg, Contains("file holds 50176 bytes of pixel data"));
  }
  SECTION("dims whose product overflows 64 bits") {
    write_raw(dir.str("img"), idx_bytes(0x803, {0xffffffffu, 0xffffffffu, 0xffffffffu}, {}));
    CHECK_THAT(pair_error(dir.str("img"), dir.str("lbl")), Contains("implausible header"));
  }
}

TEST_CASE("idx reports a missing file", "[data][idx]") {
  TempDir dir("idx");
  write_raw(dir.str("lbl"), idx_bytes(0x801, {1}, {0}));
  std::string msg = pair_error(dir.str("nope"), dir.str("lbl"));
  CHECK_THAT(msg, Contains(dir.str("nope")));
  CHECK_THAT(msg, Contains("no such file"));
}

TEST_CASE("idx dir loads both splits, mixing raw and gzip", "[data][idx]") {
  TempDir root("idx");
  std::string dir = root.str("Fashion_MNIST");
  std::filesystem::create_directories(dir);
  Sample train = make_sample(12, 4, 4, 10);
  Sample test = make_sample(4, 4, 4, 3);  // fewer classes than train
  write_idx(dir + "/" + kSplitFiles[0] + ".gz", train.images_file());
  write_idx(dir + "/" + kSplitFiles[1], train.labels_file());
  write_idx(dir + "/" + kSplitFiles[2], test.images_file());
  write_idx(dir + "/" + kSplitFiles[3] + ".gz", test.labels_file());

  // A trailing slash must not hide the directory's name from the Fashion check.
  minivit::DataSplits splits = minivit::load_idx_dir(dir + "/");
  check_matches(splits.train, train);
  check_matches(splits.test, test);
  CHECK(splits.train.num_classes == 10);
  CHECK(splits.test.num_classes == 10);
  REQUIRE(splits.train.class_names.size() == 10);
  CHECK(splits.train.class_names[0] == "T-shirt/top");
  CHECK(splits.train.class_names[9] == "Ankle boot");
  CHECK(splits.test.class_names == splits.train.class_names);
}

TEST_CASE("idx dir uses digit names outside a fashion directory", "[data][idx]") {
  TempDir root("idx");
  std::string dir = root.str("mnist");
  std::filesystem::create_directories(dir);
  Sample s = make_sample(10, 2, 2, 10);
  for (size_t i = 0; i < kSplitFiles.size(); ++i)
    write_idx(dir + "/" + kSplitFiles[i], i % 2 == 0 ? s.images_file() : s.labels_file());
  minivit::DataSplits splits = minivit::load_idx_dir(dir);
  REQUIRE(splits.train.class_names.size() == 10);
  CHECK(splits.train.class_names[9] == "9");
}

TEST_CASE("idx dir missing a file names the dir and the expected files", "[data][idx]") {
  TempDir root("idx");
  std::string dir = root.str("fashion");
  std::filesystem::create_directories(dir);
  Sample s = make_sample(2, 2, 2, 2);
  write_idx(dir + "/" + kSplitFiles[0], s.images_file());
  write_idx(dir + "/" + kSplitFiles[1], s.labels_file());
  write_idx(dir + "/" + kSplitFiles[2], s.images_file());
  std::string msg = error_of([&] { minivit::load_idx_dir(dir); });
  CHECK_THAT(msg, Contains(dir));
  CHECK_THAT(msg, Contains("missing t10k-labels-idx1-ubyte"));
  CHECK_THAT(msg, Contains("train-images-idx3-ubyte"));

  std::string no_dir = error_of([&] { minivit::load_idx_dir(root.str("absent")); });
  CHECK_THAT(no_dir, Contains(root.str("absent")));
}

TEST_CASE("idx loads the real Fashion-MNIST quickly", "[data][real]") {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::is_directory(dir)) {
    SUCCEED("Fashion-MNIST not installed at " + dir + "; skipped");
    return;
  }
  minivit::DataSplits splits = minivit::load_idx_dir(dir);

  CHECK(splits.train.size() == 60000);
  CHECK(splits.test.size() == 10000);
  CHECK(splits.train.channels() == 1);
  CHECK(splits.train.height() == 28);
  CHECK(splits.train.width() == 28);
  CHECK(splits.test.height() == 28);
  CHECK(splits.train.num_classes == 10);
  CHECK(splits.test.num_classes == 10);
  REQUIRE(splits.train.class_names.size() == 10);
  CHECK(splits.train.labels[0] == 9);
  CHECK(splits.train.class_names[splits.train.labels[0]] == "Ankle boot");
  std::vector<int> histogram(10, 0);
  for (int32_t label : splits.train.labels) histogram.at(label)++;
  CHECK(histogram == std::vector<int>(10, 6000));
}
