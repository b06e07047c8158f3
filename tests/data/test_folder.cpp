// Image folders as a dataset (folder.h): both layouts on small files of known pixels in
// every lossless format stb_image_write makes (and JPEG within its error), conversion and
// resizing, the fixed test carve of a single tree, every error a user can meet, and
// `minivit export` round-tripping an IDX dataset exactly.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "minivit/core/error.h"
#include "minivit/data/folder.h"
#include "minivit/data/idx.h"
#include "minivit/kernels/threads.h"
#include "test_util.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

using minivit::DataSplits;
using minivit::Error;
using minivit::load_folder_dataset;
using minivit_test::TempDir;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// An image of known pixels, interleaved (H, W, C) as the file formats store them.
struct Picture {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;
  uint8_t at(int y, int x, int c) const { return pixels[size_t((y * width + x) * channels + c)]; }
};

// Distinct values for image `id`; pixel (0, 0) of channel 0 is the id itself.
Picture pattern(int id, int width, int height, int channels) {
  Picture p{width, height, channels, {}};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c)
        p.pixels.push_back(uint8_t(y == 0 && x == 0 && c == 0 ? id : (id * 37 + y * 11 + x * 7 + c * 53) % 256));
  return p;
}

Picture constant(int width, int height, int channels, uint8_t value) {
  return {width, height, channels, std::vector<uint8_t>(size_t(width * height * channels), value)};
}

// Writes by the file's extension: png, bmp, tga, jpg.
void write_picture(const fs::path& path, const Picture& p) {
  fs::create_directories(path.parent_path());
  const std::string ext = path.extension().string();
  const std::string name = path.string();
  int ok = 0;
  if (ext == ".png") ok = stbi_write_png(name.c_str(), p.width, p.height, p.channels, p.pixels.data(), p.width * p.channels);
  if (ext == ".bmp") ok = stbi_write_bmp(name.c_str(), p.width, p.height, p.channels, p.pixels.data());
  if (ext == ".tga") ok = stbi_write_tga(name.c_str(), p.width, p.height, p.channels, p.pixels.data());
  if (ext == ".jpg") ok = stbi_write_jpg(name.c_str(), p.width, p.height, p.channels, p.pixels.data(), 100);
  REQUIRE(ok);
}

// Image i of a split as (C, H, W) planar bytes.
std::vector<uint8_t> image_of(const minivit::Dataset& d, int64_t i) {
  const size_t len = size_t(d.channels()) * size_t(d.height()) * size_t(d.width());
  return std::vector<uint8_t>(d.images.data() + size_t(i) * len, d.images.data() + size_t(i + 1) * len);
}

// The same picture as (C, H, W) planar bytes.
std::vector<uint8_t> planar(const Picture& p) {
  std::vector<uint8_t> out;
  for (int c = 0; c < p.channels; ++c)
    for (int y = 0; y < p.height; ++y)
      for (int x = 0; x < p.width; ++x) out.push_back(p.at(y, x, c));
  return out;
}

// A truncated PNG: a valid header claiming `width` x `height`, no pixel data.
void write_png_header_only(const fs::path& path, uint32_t width, uint32_t height) {
  std::string bytes = "\x89PNG\r\n\x1a\n";
  auto be32 = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(char((v >> s) & 0xff));
  };
  be32(13);
  bytes += "IHDR";
  be32(width);
  be32(height);
  bytes += std::string("\x08\x00\x00\x00\x00", 5);  // 8-bit grey, no interlace
  be32(0);                                           // CRC (stb_image does not check it)
  minivit_test::write_text(path.string(), bytes);
}

void require_same(const DataSplits& a, const DataSplits& b) {
  REQUIRE(a.train.labels == b.train.labels);
  REQUIRE(a.test.labels == b.test.labels);
  REQUIRE(a.train.images == b.train.images);
  REQUIRE(a.test.images == b.test.images);
}

}  // namespace

TEST_CASE("folder: two-split layout gives sorted classes, labels and exact pixels", "[folder]") {
  TempDir dir("folder_split");
  const fs::path root = dir.path;
  // Classes are created out of order; files within a class too, in three lossless formats.
  write_picture(root / "train/beta/b.bmp", pattern(1, 5, 4, 1));
  write_picture(root / "train/beta/a.png", pattern(2, 5, 4, 1));
  write_picture(root / "train/Alpha/z.tga", pattern(3, 5, 4, 1));
  write_picture(root / "train/Alpha/y.png", pattern(4, 5, 4, 1));
  write_picture(root / "train/gamma/x.png", pattern(5, 5, 4, 1));
  write_picture(root / "test/beta/q.tga", pattern(6, 5, 4, 1));
  // Hidden entries are skipped at every level, plain files beside the class folders ignored.
  minivit_test::write_text((root / "train/beta/.DS_Store").string(), "not an image");
  write_picture(root / "train/.cache/w.png", pattern(7, 5, 4, 1));
  minivit_test::write_text((root / "README.txt").string(), "about this dataset");
  minivit_test::write_text((root / "train/labels.txt").string(), "Alpha beta gamma");

  const DataSplits d = load_folder_dataset(root.string(), 1, 99, false, 0.5f);
  // Bytewise: upper case sorts before lower case.
  CHECK(d.train.class_names == std::vector<std::string>{"Alpha", "beta", "gamma"});
  CHECK(d.test.class_names == d.train.class_names);
  CHECK(d.train.num_classes == 3);
  CHECK(d.test.num_classes == 3);
  // Without resize the images keep their own (non-square) size; the test split is as given.
  REQUIRE(d.train.size() == 5);
  REQUIRE(d.test.size() == 1);
  CHECK(d.train.channels() == 1);
  CHECK(d.train.height() == 4);
  CHECK(d.train.width() == 5);
  CHECK(d.train.labels == std::vector<int32_t>{0, 0, 1, 1, 2});
  CHECK(d.test.labels == std::vector<int32_t>{1});
  const int train_ids[] = {4, 3, 2, 1, 5};  // Alpha/y, Alpha/z, beta/a, beta/b, gamma/x
  for (int i = 0; i < 5; ++i) CHECK(image_of(d.train, i) == planar(pattern(train_ids[i], 5, 4, 1)));
  CHECK(image_of(d.test, 0) == planar(pattern(6, 5, 4, 1)));
}

TEST_CASE("folder: grey and RGB files convert to the model's channels", "[folder]") {
  TempDir dir("folder_channels");
  const Picture rgb = pattern(9, 4, 4, 3), grey = pattern(8, 4, 4, 1);
  write_picture(dir.path / "rgb/a.png", rgb);
  write_picture(dir.path / "rgb/b.bmp", rgb);
  write_picture(dir.path / "grey/a.png", grey);

  const DataSplits colour = load_folder_dataset(dir.str(), 3, 4, true, 0.0f);
  REQUIRE(colour.train.size() == 3);
  CHECK(colour.train.channels() == 3);
  // grey (label 0) becomes three equal planes; RGB is read exactly from PNG and BMP.
  std::vector<uint8_t> grey3 = planar(grey);
  const std::vector<uint8_t> one = grey3;
  grey3.insert(grey3.end(), one.begin(), one.end());
  grey3.insert(grey3.end(), one.begin(), one.end());
  CHECK(image_of(colour.train, 0) == grey3);
  CHECK(image_of(colour.train, 1) == planar(rgb));
  CHECK(image_of(colour.train, 2) == planar(rgb));

  // RGB -> grey is stb_image's integer luma.
  const DataSplits mono = load_folder_dataset(dir.str(), 1, 4, true, 0.0f);
  CHECK(mono.train.channels() == 1);
  std::vector<uint8_t> luma;
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x)
      luma.push_back(uint8_t((rgb.at(y, x, 0) * 77 + rgb.at(y, x, 1) * 150 + rgb.at(y, x, 2) * 29) >> 8));
  CHECK(image_of(mono.train, 1) == luma);
  CHECK(image_of(mono.train, 0) == planar(grey));
}

TEST_CASE("folder: resizing, same-size files untouched, JPEG within its error", "[folder]") {
  TempDir dir("folder_resize");
  write_picture(dir.path / "big/a.png", constant(8, 8, 1, 123));
  write_picture(dir.path / "big/b.png", constant(16, 6, 3, 77));  // also non-square and RGB
  write_picture(dir.path / "exact/a.png", pattern(3, 4, 4, 1));
  write_picture(dir.path / "photo/a.jpg", constant(8, 8, 3, 200));

  const DataSplits d = load_folder_dataset(dir.str(), 1, 4, true, 0.0f);
  REQUIRE(d.train.size() == 4);
  CHECK(d.train.height() == 4);
  CHECK(d.train.width() == 4);
  CHECK(image_of(d.train, 0) == std::vector<uint8_t>(16, 123));
  CHECK(image_of(d.train, 1) == std::vector<uint8_t>(16, 77));
  CHECK(image_of(d.train, 2) == planar(pattern(3, 4, 4, 1)));
  for (uint8_t v : image_of(d.train, 3)) CHECK(std::abs(int(v) - 200) <= 2);
}

TEST_CASE("folder: a single tree is split into train and test the same way every time",
          "[folder]") {
  TempDir dir("folder_carve");
  const int sizes[] = {10, 7, 3, 1};
  int id = 0;
  std::vector<int> label_of_id;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < sizes[k]; ++i) {
      write_picture(dir.path / ("class" + std::to_string(k)) / ("img" + std::to_string(i) + ".png"),
                    pattern(id++, 4, 4, 1));
      label_of_id.push_back(k);
    }

  const DataSplits a = load_folder_dataset(dir.str(), 1, 4, true, 0.25f);
  // round(0.25 * cumulative count) per class: 10 -> 3 (2.5 rounds up), 17 -> 4, 20 -> 5,
  // 21 -> 5; the one-image class keeps its image.
  CHECK(a.test.size() == 5);
  CHECK(a.train.size() == 16);
  std::vector<int> per_class(4, 0);
  for (int32_t label : a.test.labels) ++per_class[size_t(label)];
  CHECK(per_class == std::vector<int>{3, 1, 1, 0});

  // Every image is in exactly one split, with its label; train keeps file order.
  std::multiset<int> seen;
  for (const minivit::Dataset* split : {&a.train, &a.test})
    for (int64_t i = 0; i < split->size(); ++i) {
      const int image_id = image_of(*split, i)[0];
      seen.insert(image_id);
      CHECK(label_of_id[size_t(image_id)] == split->labels[size_t(i)]);
    }
  std::multiset<int> all;
  for (int i = 0; i < id; ++i) all.insert(i);
  CHECK(seen == all);
  for (int64_t i = 1; i < a.train.size(); ++i) CHECK(image_of(a.train, i - 1)[0] < image_of(a.train, i)[0]);

  // Same split on a second load, and whatever the thread count.
  require_same(a, load_folder_dataset(dir.str(), 1, 4, true, 0.25f));
  const int threads = minivit::num_threads();
  minivit::set_num_threads(1);
  const DataSplits one_thread = load_folder_dataset(dir.str(), 1, 4, true, 0.25f);
  minivit::set_num_threads(threads);
  require_same(a, one_thread);

  const DataSplits none = load_folder_dataset(dir.str(), 1, 4, true, 0.0f);
  CHECK(none.train.size() == 21);
  CHECK(none.test.size() == 0);
}

TEST_CASE("folder: every broken layout or file is one error naming it", "[folder][errors]") {
  TempDir dir("folder_errors");
  const fs::path root = dir.path;
  auto load = [](const fs::path& p, bool resize = true) {
    return load_folder_dataset(p.string(), 1, 4, resize, 0.1f);
  };
  auto good = [](const fs::path& p) { write_picture(p, pattern(1, 4, 4, 1)); };

  SECTION("missing path, or a file") {
    REQUIRE_THROWS_WITH(load(root / "nope"), Contains((root / "nope").string()) && Contains("no such directory"));
    minivit_test::write_text((root / "file").string(), "x");
    REQUIRE_THROWS_WITH(load(root / "file"), Contains((root / "file").string()) && Contains("not a directory"));
  }
  SECTION("no class folders") {
    minivit_test::write_text((root / "notes.txt").string(), "x");
    fs::create_directories(root / ".hidden");
    REQUIRE_THROWS_WITH(load(root), Contains(root.string()) && Contains("no class folders"));
  }
  SECTION("a class folder whose name is not UTF-8") {
    good(root / "a/1.png");
    good(root / "b\xE9t\xE9/1.png");  // Latin-1, as an old archive might have it
    REQUIRE_THROWS_WITH(load(root), Contains((root / "b\xE9t\xE9").string()) && Contains("not UTF-8"));
  }
  SECTION("an empty class folder, or one with only hidden files") {
    good(root / "a/1.png");
    fs::create_directories(root / "b");
    minivit_test::write_text((root / "b/.keep").string(), "");
    REQUIRE_THROWS_WITH(load(root), Contains((root / "b").string()) && Contains("holds no image files"));
  }
  SECTION("a file that is not an image") {
    good(root / "a/1.png");
    minivit_test::write_text((root / "a/notes.txt").string(), "hello");
    REQUIRE_THROWS_WITH(load(root), Contains((root / "a/notes.txt").string()) &&
                                        Contains("not an image stb_image can read"));
  }
  SECTION("a truncated image") {
    good(root / "a/1.png");
    write_png_header_only(root / "a/2.png", 4, 4);
    REQUIRE_THROWS_WITH(load(root), Contains((root / "a/2.png").string()) && Contains("cannot decode"));
  }
  SECTION("absurd dimensions are refused before decoding") {
    good(root / "a/1.png");
    write_png_header_only(root / "a/2.png", 20000, 20);
    REQUIRE_THROWS_WITH(load(root), Contains((root / "a/2.png").string()) && Contains("20000x20"));
    write_png_header_only(root / "a/2.png", 10000, 10000);  // sides fine, 10^8 pixels not
    REQUIRE_THROWS_WITH(load(root), Contains((root / "a/2.png").string()) && Contains("10000x10000"));
    REQUIRE_THROWS_WITH(load(root, false), Contains((root / "a/2.png").string()) && Contains("10000x10000"));
  }
  SECTION("a folder inside a class folder") {
    good(root / "a/1.png");
    good(root / "a/more/2.png");
    REQUIRE_THROWS_WITH(load(root), Contains((root / "a/more").string()) && Contains("nested folders"));
  }
  SECTION("without resize, an image of another size") {
    good(root / "a/1.png");
    write_picture(root / "b/2.png", pattern(2, 6, 5, 1));
    REQUIRE_THROWS_WITH(load(root, false), Contains((root / "b/2.png").string()) && Contains("6x5") &&
                                               Contains((root / "a/1.png").string()) && Contains("4x4"));
    CHECK_NOTHROW(load(root, true));
  }
  SECTION("the first bad file in order is reported, whatever the threads") {
    for (int i = 0; i < 40; ++i) good(root / "a" / ("img" + std::to_string(100 + i) + ".png"));
    minivit_test::write_text((root / "a/img120.png").string(), "bad");
    minivit_test::write_text((root / "a/img130.png").string(), "bad");
    minivit_test::write_text((root / "b/img000.png").string(), "bad");
    for (int run = 0; run < 3; ++run)
      REQUIRE_THROWS_WITH(load(root), Contains((root / "a/img120.png").string()));
  }
  SECTION("two-split layout: test needs train's classes, and both splits") {
    good(root / "train/a/1.png");
    REQUIRE_THROWS_WITH(load(root), Contains((root / "test").string()) && Contains("missing"));
    good(root / "test/zebra/1.png");
    REQUIRE_THROWS_WITH(load(root), Contains((root / "test/zebra").string()) && Contains("not in"));
    fs::remove_all(root / "test/zebra");
    good(root / "test/a/1.png");
    good(root / "val/a/1.png");
    REQUIRE_THROWS_WITH(load(root), Contains((root / "val").string()) && Contains("unexpected folder"));
    fs::remove_all(root / "val");
    CHECK(load(root).test.size() == 1);
  }
}

TEST_CASE("folder: class names become safe folder names", "[folder]") {
  CHECK(minivit::class_folder_name("T-shirt/top") == "T-shirt_top");
  CHECK(minivit::class_folder_name("Ankle boot") == "Ankle boot");
  CHECK(minivit::class_folder_name("a\\b:c*d?e\"f<g>h|i") == "a_b_c_d_e_f_g_h_i");
  CHECK(minivit::class_folder_name(".hidden") == "_hidden");
  CHECK(minivit::class_folder_name("..") == "_.");
  CHECK(minivit::class_folder_name("") == "_");
  CHECK(minivit::class_folder_name(std::string("tab\there", 8)) == "tab_here");
}

TEST_CASE("export writes an IDX dataset as PNG folders that load back exactly",
          "[folder][cli]") {
  TempDir dir("folder_export");
  const std::string data = dir.str("idx"), out = dir.str("png"), config = dir.str("tiny.toml");
  minivit_test::write_tiny_idx_dataset(data, 60, 20, 8, 4);
  minivit_test::write_text(config, minivit_test::tiny_config_toml(data, dir.str("run")));
  const std::vector<std::string> names = {"T-shirt/top", "b", "c", "d"};
  const auto result = minivit_test::run_minivit(
      "export --config " + config + " --set 'data.class_names=[\"T-shirt/top\",\"b\",\"c\",\"d\"]' --out " + out);
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("60 train + 20 test"));
  CHECK(fs::exists(out + "/train/T-shirt_top"));
  CHECK(fs::exists(out + "/test/d"));
  for (const auto& entry : fs::directory_iterator(dir.path))
    CHECK_THAT(entry.path().filename().string(), !Contains(".tmp."));

  const DataSplits idx = minivit::load_idx_dir(data);
  const DataSplits png = load_folder_dataset(out, 1, 8, false, 0.1f);
  for (auto [from, to] : {std::pair{&idx.train, &png.train}, std::pair{&idx.test, &png.test}}) {
    REQUIRE(to->size() == from->size());
    // The folder loader reads class by class (folder names sorted), files in index order.
    std::vector<int64_t> order(size_t(from->size()));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return minivit::class_folder_name(names[size_t(from->labels[size_t(a)])]) <
             minivit::class_folder_name(names[size_t(from->labels[size_t(b)])]);
    });
    for (int64_t j = 0; j < to->size(); ++j) {
      const int64_t i = order[size_t(j)];
      CHECK(to->class_names[size_t(to->labels[size_t(j)])] ==
            minivit::class_folder_name(names[size_t(from->labels[size_t(i)])]));
      CHECK(image_of(*to, j) == image_of(*from, i));
    }
  }

  // A directory that already holds files is refused; --split writes one split.
  const auto again = minivit_test::run_minivit("export --config " + config + " --out " + out);
  CHECK(again.exit_code == 1);
  CHECK_THAT(again.err, Contains(out) && Contains("already holds files"));
  fs::create_directories(dir.str("empty"));
  const auto train_only =
      minivit_test::run_minivit("export --config " + config + " --split train --out " + dir.str("empty"));
  CHECK(train_only.exit_code == 0);
  CHECK(fs::exists(dir.str("empty/train")));
  CHECK_FALSE(fs::exists(dir.str("empty/test")));
}

TEST_CASE("export writes RGB folders as RGB PNGs that load back exactly", "[folder][cli]") {
  TempDir dir("folder_export_rgb");
  const std::string tree = dir.str("tree"), out = dir.str("png"), config = dir.str("tiny.toml");
  for (int i = 0; i < 6; ++i) write_picture(fs::path(tree) / (i < 3 ? "cat" : "dog") / (std::to_string(i) + ".png"), pattern(i, 8, 8, 3));
  minivit_test::write_text(config, minivit_test::tiny_config_toml(tree, dir.str("run")));
  const auto result = minivit_test::run_minivit(
      "export --config " + config + " --set data.format=folder --set model.channels=3 " +
      "--set 'data.mean=[0.5,0.5,0.5]' --set 'data.std=[0.2,0.2,0.2]' --set data.val_fraction=0.34 --out " + out);
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const DataSplits before = load_folder_dataset(tree, 3, 8, true, 0.34f);
  const DataSplits after = load_folder_dataset(out, 3, 8, true, 0.34f);
  CHECK(before.test.size() == 2);
  CHECK(after.train.class_names == before.train.class_names);
  require_same(before, after);
}
