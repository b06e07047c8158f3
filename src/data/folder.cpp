#include "minivit/data/folder.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <new>
#include <utility>

#include "minivit/core/error.h"
#include "minivit/core/rng.h"
#include "minivit/core/utf8.h"
#include "minivit/data/image_io.h"

namespace minivit {

namespace fs = std::filesystem;

namespace {

// The single tree's test carve ignores train.seed, so that every run (and `eval` later)
// sees the same test images. The purpose tag keeps this stream apart from rng.h's.
constexpr uint64_t kTestCarveSeed = 0;
constexpr uint64_t kTestCarvePurpose = 0x666f6c642d747374;  // "fold-tst"

const char* const kLayoutHint =
    "expected PATH/<class>/<image files>, or PATH/train/<class>/... and PATH/test/<class>/...";

// One file to decode, and where its pixels and label go.
struct PendingImage {
  std::string path;
  int32_t label = 0;
  bool test = false;  // into the test split, else train
  int64_t slot = 0;   // index within that split
};

bool is_hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

// The entries of `dir` that are not hidden, sorted bytewise by name.
std::vector<fs::directory_entry> list_dir(const fs::path& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw Error(dir.string() + ": cannot list the folder (" + ec.message() + ")");
  std::vector<std::pair<std::string, fs::directory_entry>> named;
  while (it != fs::directory_iterator()) {
    if (!is_hidden(it->path())) named.emplace_back(it->path().filename().string(), *it);
    it.increment(ec);
    if (ec) throw Error(dir.string() + ": cannot list the folder (" + ec.message() + ")");
  }
  // std::string compares as unsigned bytes, so this order does not depend on the locale.
  std::sort(named.begin(), named.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<fs::directory_entry> entries;
  entries.reserve(named.size());
  for (auto& [name, entry] : named) entries.push_back(std::move(entry));
  return entries;
}

std::vector<std::string> class_folders(const fs::path& root) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& entry : list_dir(root))
    if (entry.is_directory(ec)) {
      std::string name = entry.path().filename().string();
      if (!is_valid_utf8(name))
        throw Error(entry.path().string() +
                    ": class folder name is not UTF-8 text; class names are stored in "
                    "checkpoints as UTF-8 (rename the folder)");
      names.push_back(std::move(name));
    }
  if (names.empty()) throw Error(root.string() + ": no class folders (" + kLayoutHint + ")");
  return names;
}

std::vector<std::string> image_files(const fs::path& class_dir) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const fs::directory_entry& entry : list_dir(class_dir)) {
    if (entry.is_directory(ec))
      throw Error(entry.path().string() + ": a folder inside class folder " + class_dir.string() +
                  "; class folders hold image files only (nested folders are not read)");
    if (!entry.is_regular_file(ec))
      throw Error(entry.path().string() + ": not a regular file (expected an image file)");
    paths.push_back(entry.path().string());
  }
  if (paths.empty())
    throw Error(class_dir.string() + ": class folder holds no image files (names starting with '.' are skipped)");
  return paths;
}

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Which of a class's n files go to test: `count` of them, drawn by a permutation keyed by the
// class name (so a class's draw does not change when other classes come or go).
std::vector<bool> pick_test_files(const std::string& class_name, int64_t n, int64_t count) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
  const uint64_t key = rng_key(kTestCarveSeed, kTestCarvePurpose, fnv1a(class_name));
  for (int64_t i = n - 1; i > 0; --i)  // Fisher-Yates
    std::swap(order[size_t(i)], order[size_t(rng_u64(key, uint64_t(i)) % uint64_t(i + 1))]);
  std::vector<bool> test(size_t(n), false);
  for (int64_t i = 0; i < count; ++i) test[size_t(order[size_t(i)])] = true;
  return test;
}

// The images a folder holds, in the order they are decoded, each with its label and slot.
struct FileList {
  std::vector<PendingImage> files;
  std::vector<std::string> class_names;  // sorted; a label indexes them
  int64_t n_train = 0, n_test = 0;
};

// PATH/train/<class>/... and PATH/test/<class>/..., the test classes a subset of train's.
FileList list_two_splits(const fs::path& root) {
  std::error_code ec;
  const fs::path train_dir = root / "train", test_dir = root / "test";
  if (!fs::is_directory(test_dir, ec))
    throw Error(test_dir.string() + ": missing; " + train_dir.string() +
                " exists, so the two-split layout PATH/train/<class>, PATH/test/<class> is expected");
  for (const fs::directory_entry& entry : list_dir(root)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory(ec) && name != "train" && name != "test")
      throw Error(entry.path().string() + ": unexpected folder beside train/ and test/ (" +
                  kLayoutHint + "; a validation split is carved from train by data.val_fraction)");
  }
  FileList list;
  list.class_names = class_folders(train_dir);
  for (size_t k = 0; k < list.class_names.size(); ++k)
    for (std::string& file : image_files(train_dir / list.class_names[k]))
      list.files.push_back({std::move(file), int32_t(k), false, list.n_train++});
  for (const std::string& name : class_folders(test_dir)) {
    const auto it = std::lower_bound(list.class_names.begin(), list.class_names.end(), name);
    if (it == list.class_names.end() || *it != name)
      throw Error((test_dir / name).string() + ": class folder '" + name + "' is not in " +
                  train_dir.string() + "; the test split's classes must be a subset of train's");
    for (std::string& file : image_files(test_dir / name))
      list.files.push_back({std::move(file), int32_t(it - list.class_names.begin()), true,
                            list.n_test++});
  }
  return list;
}

// PATH/<class>/..., a test_fraction of each class carved off as the test split.
FileList list_carved(const fs::path& root, float test_fraction) {
  FileList list;
  list.class_names = class_folders(root);
  int64_t seen = 0;  // images of the classes before this one
  for (size_t k = 0; k < list.class_names.size(); ++k) {
    std::vector<std::string> paths = image_files(root / list.class_names[k]);
    const int64_t n = int64_t(paths.size());
    // Cumulative rounding: the counts add up to round(f * total), each within 1 of f * n.
    int64_t count = std::llround(double(test_fraction) * double(seen + n)) -
                    std::llround(double(test_fraction) * double(seen));
    count = std::min(count, n - 1);
    seen += n;
    const std::vector<bool> test = pick_test_files(list.class_names[k], n, count);
    for (int64_t i = 0; i < n; ++i) {
      const bool to_test = test[size_t(i)];
      list.files.push_back({std::move(paths[size_t(i)]), int32_t(k), to_test,
                            to_test ? list.n_test++ : list.n_train++});
    }
  }
  return list;
}

// Decodes every file into its slot of `splits`, whose images are already shaped (N, C, H, W);
// with `check_size`, each image must be W x H. In parallel: each image lands in its own slot,
// so the result does not depend on the thread count. Files after a failed one are skipped,
// but never one before it, so the error reported is always that of the first bad file in
// order.
void decode_files(const std::vector<PendingImage>& files, DataSplits& splits, int channels,
                  int width, int height, bool check_size) {
  const int64_t n = int64_t(files.size());
  const size_t image_len = size_t(channels) * size_t(height) * size_t(width);
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::atomic<int64_t> first_failure{n};
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t i = 0; i < n; ++i) {
    if (i > first_failure.load(std::memory_order_relaxed)) continue;
    const PendingImage& file = files[size_t(i)];
    Dataset& split = file.test ? splits.test : splits.train;
    bool ok = true;
    try {  // nothing may leave an OpenMP region as an exception
      std::string error;
      if (check_size) {
        ImageHeader header;
        error = read_image_header(file.path, header);
        if (error.empty() && (header.width != width || header.height != height))
          error = "image is " + std::to_string(header.width) + "x" + std::to_string(header.height) +
                  ", but the first image " + files[0].path + " is " + std::to_string(width) + "x" +
                  std::to_string(height) + "; with data.resize = false all images must have one size";
      }
      if (error.empty())
        error = decode_image(file.path, channels, width, height,
                             split.images.data() + size_t(file.slot) * image_len);
      split.labels[size_t(file.slot)] = file.label;
      if (!error.empty()) {
        ok = false;
        errors[size_t(i)] = file.path + ": " + error;
      }
    } catch (...) {  // only allocation can fail here; errors[i] stays empty and says so below
      ok = false;
    }
    if (!ok) {
      int64_t current = first_failure.load();
      while (i < current && !first_failure.compare_exchange_weak(current, i)) {
      }
    }
  }
  const int64_t failed = first_failure.load();
  if (failed < n) {
    const std::string& message = errors[size_t(failed)];
    throw Error(message.empty() ? files[size_t(failed)].path + ": out of memory while loading" : message);
  }
}

}  // namespace

std::string class_folder_name(const std::string& class_name) {
  if (class_name.empty()) return std::string(1, '_');
  std::string name = class_name;
  for (char& c : name) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || std::strchr("/\\<>:\"|?*", c)) c = '_';
  }
  if (name[0] == '.') name[0] = '_';
  return name;
}

DataSplits load_folder_dataset(const std::string& path, int channels, int image_size,
                               bool resize, float test_fraction) {
  std::error_code ec;
  const fs::path root(path);
  if (!fs::exists(root, ec))
    throw Error(path + ": no such directory (" + kLayoutHint + ")");
  if (!fs::is_directory(root, ec))
    throw Error(path + ": not a directory (" + kLayoutHint + ")");
  if (channels < 1 || channels > 4)
    throw Error(path + ": images can be converted to 1 to 4 channels, but model.channels = " +
                std::to_string(channels));
  if (resize && image_size < 1)
    throw Error(path + ": cannot resize images to model.image_size = " + std::to_string(image_size));
  if (!(test_fraction >= 0.0f && test_fraction < 1.0f))
    throw Error(path + ": data.val_fraction = " + std::to_string(test_fraction) +
                ", expected 0 <= val_fraction < 1");

  const FileList list = fs::is_directory(root / "train", ec) ? list_two_splits(root)
                                                               : list_carved(root, test_fraction);
  const std::vector<PendingImage>& files = list.files;

  // The output size: model.image_size, or the first image's when they are not resized.
  int width = image_size, height = image_size;
  if (!resize) {
    ImageHeader first;
    const std::string error = read_image_header(files[0].path, first);
    if (!error.empty()) throw Error(files[0].path + ": " + error);
    width = first.width;
    height = first.height;
  }

  DataSplits splits;
  const size_t C = size_t(channels), H = size_t(height), W = size_t(width);
  splits.train.images = xt::xtensor<uint8_t, 4>::from_shape({size_t(list.n_train), C, H, W});
  splits.test.images = xt::xtensor<uint8_t, 4>::from_shape({size_t(list.n_test), C, H, W});
  splits.train.labels.resize(size_t(list.n_train));
  splits.test.labels.resize(size_t(list.n_test));
  for (Dataset* split : {&splits.train, &splits.test}) {
    split->num_classes = int(list.class_names.size());
    split->class_names = list.class_names;
  }
  decode_files(files, splits, channels, width, height, !resize);
  return splits;
}

}  // namespace minivit
