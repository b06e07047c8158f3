#include "minivit/data/cifar.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "minivit/core/error.h"
#include "minivit/core/utf8.h"
#include "minivit/data/byte_reader.h"

namespace minivit {

namespace fs = std::filesystem;

namespace {

constexpr size_t kChannels = 3;
constexpr size_t kSide = 32;
constexpr size_t kPixelBytes = kChannels * kSide * kSide;  // (3, 32, 32) per record

// Records are read in chunks of this many (about 0.8 MB), never the whole file at once,
// so memory holds the dataset and little else.
constexpr size_t kChunkRecords = 256;

// The official names files are about 1 KB; anything much larger is some other file.
constexpr uintmax_t kMaxNamesFileBytes = 1 << 20;

// How one flavour of CIFAR lays out its records and its directory.
struct Layout {
  std::string dataset;                   // "CIFAR-10", for messages
  std::string tarball;                   // the official download, for messages
  std::string subdir;                    // what the tarball unpacks into
  std::vector<std::string> label_kinds;  // per label byte, for messages: "label", "fine label"
  std::vector<int> label_classes;        // per label byte: values must be in [0, K)
  size_t used_label = 0;                 // which label byte becomes Dataset::labels
  std::string expects;                   // the directory's expected contents, for messages
  std::string other_marker;              // a file only the other CIFAR's directory has
  std::string other_subdir;              // what the other CIFAR's tarball unpacks into
  std::string other_format;              // the data.format that reads the other CIFAR

  size_t label_bytes() const { return label_classes.size(); }
  size_t record_bytes() const { return label_bytes() + kPixelBytes; }
  std::string record_text() const {
    std::string labels = label_bytes() == 1 ? "1 label byte" : "coarse and fine label bytes";
    return std::to_string(record_bytes()) + "-byte " + dataset + " records (" + labels + " + " +
           std::to_string(kPixelBytes) + " pixel bytes)";
  }
};

Layout cifar10_layout() {
  Layout l;
  l.dataset = "CIFAR-10";
  l.tarball = "cifar-10-binary.tar.gz";
  l.subdir = "cifar-10-batches-bin";
  l.label_kinds = {"label"};
  l.label_classes = {10};
  l.used_label = 0;
  l.expects = "data_batch_1.bin .. data_batch_5.bin and test_batch.bin, as " + l.tarball +
              " unpacks into " + l.subdir + "/, or the parent of " + l.subdir + "/";
  l.other_marker = "train.bin";
  l.other_subdir = "cifar-100-binary";
  l.other_format = "cifar100";
  return l;
}

Layout cifar100_layout(Cifar100Label label) {
  Layout l;
  l.dataset = "CIFAR-100";
  l.tarball = "cifar-100-binary.tar.gz";
  l.subdir = "cifar-100-binary";
  l.label_kinds = {"coarse label", "fine label"};
  l.label_classes = {20, 100};
  l.used_label = label == Cifar100Label::coarse ? 0 : 1;
  l.expects = "train.bin and test.bin, as " + l.tarball + " unpacks into " + l.subdir +
              "/, or the parent of " + l.subdir + "/";
  l.other_marker = "data_batch_1.bin";
  l.other_subdir = "cifar-10-batches-bin";
  l.other_format = "cifar10";
  return l;
}

std::string plural(uint64_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// One batch file, raw or gzip, read record by record.
class BatchFile {
 public:
  BatchFile(const std::string& path, const Layout& layout)
      : file_(path, "a " + layout.dataset + " batch file",
              "a batch file of " + layout.record_text()),
        layout_(layout) {}

  // The number of records, checked to be at least one and whole. A gzip file is
  // decompressed once just to count, so nothing is allocated before its size is known.
  uint64_t count_records() {
    uint64_t bytes = file_.file_size();
    std::string size_text = "size " + std::to_string(bytes) + " bytes";
    if (file_.is_gzip()) {
      bytes = file_.skip_to_end();
      file_.check_stream_end();
      file_.rewind();
      size_text = "decompressed size " + std::to_string(bytes) + " bytes";
    }
    const uint64_t record = layout_.record_bytes();
    if (bytes == 0) fail("empty file, expected " + layout_.record_text());
    if (bytes % record != 0) {
      std::string msg = size_text + " is not a whole number of " + layout_.record_text() + ": " +
                        plural(bytes / record, "record") + " and " +
                        plural(bytes % record, "byte") + " over";
      // The other CIFAR's record is one byte longer or shorter: name the likely mix-up.
      uint64_t other = layout_.label_bytes() == 1 ? record + 1 : record - 1;
      if (bytes % other == 0)
        msg += " (its size fits " + std::to_string(other) + "-byte records: is this " +
               (layout_.label_bytes() == 1 ? "CIFAR-100?" : "CIFAR-10?") + ")";
      fail(msg);
    }
    return bytes / record;
  }

  // Reads `count` records: pixels into images[first..], labels into labels[first..].
  void read_records(Dataset& into, uint64_t first, uint64_t count) {
    const size_t record = layout_.record_bytes();
    std::vector<uint8_t> chunk(kChunkRecords * record);  // (records, record bytes)
    for (uint64_t done = 0; done < count;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(kChunkRecords, count - done));
      size_t got = file_.read_some(chunk.data(), n * record);
      if (got < n * record) {
        file_.check_stream_end();
        fail("changed while being read: ended after " + std::to_string(done * record + got) +
             " of " + std::to_string(count * record) + " bytes");
      }
      for (size_t r = 0; r < n; ++r) {
        const uint8_t* src = chunk.data() + r * record;
        for (size_t b = 0; b < layout_.label_bytes(); ++b)
          if (src[b] >= layout_.label_classes[b])
            fail("record " + std::to_string(done + r) + " (counting from 0) has " +
                 layout_.label_kinds[b] + " " + std::to_string(src[b]) + ", expected 0.." +
                 std::to_string(layout_.label_classes[b] - 1));
        const uint64_t i = first + done + r;
        into.labels[i] = src[layout_.used_label];
        std::memcpy(into.images.data() + i * kPixelBytes, src + layout_.label_bytes(),
                    kPixelBytes);
      }
      done += n;
    }
    uint8_t extra;
    if (file_.read_some(&extra, 1) > 0)
      fail("changed while being read: grew past its counted size");
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const { file_.fail(msg); }

  ByteReader file_;
  const Layout& layout_;
};

// Something (file, directory, even a broken link) exists at p.
bool present(const fs::path& p) {
  std::error_code ec;
  return fs::symlink_status(p, ec).type() != fs::file_type::not_found && !ec;
}

// The directory holding the batch files: `dir` itself, or the subdirectory the official
// tarball unpacks into when `dir` is its parent.
fs::path batch_dir(const std::string& dir, const Layout& layout, const std::string& first_file) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(dir + (present(dir) ? ": not a directory" : ": no such directory") +
                " (expected a " + layout.dataset + " binary directory holding " +
                layout.expects + ")");
  if (find_raw_or_gzip(dir, first_file).empty() &&
      fs::is_directory(fs::path(dir) / layout.subdir, ec))
    return fs::path(dir) / layout.subdir;
  return fs::path(dir);
}

std::string find_required_batch(const fs::path& dir, const std::string& name,
                                const Layout& layout) {
  std::string path = find_raw_or_gzip(dir, name);
  if (path.empty()) {
    std::string msg = dir.string() + ": missing " + name + "[.gz]; a " + layout.dataset +
                      " binary directory holds " + layout.expects;
    // The python version of the same data names its files without the .bin.
    if (present(dir / fs::path(name).stem()))
      msg += " (" + fs::path(name).stem().string() + " without .bin is the python version; " +
             "minivit reads the binary version, " + layout.tarball + ")";
    else if (present(dir / layout.other_marker))
      msg += " (" + layout.other_marker + " is there: is this data.format = \"" +
             layout.other_format + "\"?)";
    else if (present(dir / layout.other_subdir))
      msg += " (" + layout.other_subdir + "/ is there: is this data.format = \"" +
             layout.other_format + "\"?)";
    throw Error(msg);
  }
  return path;
}

// Reads the batch files in order into one Dataset. Every file is opened and counted first,
// so a bad file anywhere fails before the images are allocated.
Dataset load_batches(const std::vector<std::string>& paths, const Layout& layout) {
  std::vector<std::unique_ptr<BatchFile>> files;
  std::vector<uint64_t> counts;
  uint64_t total = 0;
  for (const std::string& path : paths) {
    files.push_back(std::make_unique<BatchFile>(path, layout));
    counts.push_back(files.back()->count_records());
    total += counts.back();
  }
  Dataset ds;
  ds.images = xt::xtensor<uint8_t, 4>::from_shape({total, kChannels, kSide, kSide});
  ds.labels.resize(total);
  uint64_t first = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    files[f]->read_records(ds, first, counts[f]);
    first += counts[f];
    files[f].reset();  // close each file as soon as it is read
  }
  return ds;
}

// One name per line, surrounding whitespace trimmed, blank lines ignored; empty if the
// file does not exist. Any other count than `expected` is an error: names would be
// attached to the wrong classes.
std::vector<std::string> read_class_names(const fs::path& path, size_t expected) {
  const std::string where = path.string() + ": ";
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) return {};
  if (ec) throw Error(where + "cannot read (" + ec.message() + ")");
  if (fs::is_directory(status))
    throw Error(where + "is a directory, expected a text file of " + std::to_string(expected) +
                " class names, one per line");
  uintmax_t size = fs::file_size(path, ec);
  if (ec) throw Error(where + "cannot read (" + ec.message() + ")");
  if (size > kMaxNamesFileBytes)
    throw Error(where + std::to_string(size) + " bytes is too large for a file of " +
                std::to_string(expected) + " class names, one per line");
  std::ifstream in(path);
  if (!in) throw Error(where + "cannot open (" + std::strerror(errno) + ")");
  std::vector<std::string> names;
  const char* space = " \t\r\n\v\f";
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    size_t begin = line.find_first_not_of(space);
    if (begin == std::string::npos) continue;
    names.push_back(line.substr(begin, line.find_last_not_of(space) + 1 - begin));
    if (!is_valid_utf8(names.back()))
      throw Error(where + "line " + std::to_string(line_number) +
                  " is not UTF-8 text; class names are stored in checkpoints as UTF-8");
  }
  if (in.bad()) throw Error(where + "read error (" + std::strerror(errno) + ")");
  if (names.size() != expected)
    throw Error(where + plural(names.size(), "class name") + ", expected " +
                std::to_string(expected) + " (one per line, blank lines ignored)");
  return names;
}

std::vector<std::string> cifar10_names() {
  return {"airplane", "automobile", "bird", "cat", "deer",
          "dog",      "frog",       "horse", "ship", "truck"};
}

std::vector<std::string> cifar100_fine_names() {
  return {"apple",        "aquarium_fish", "baby",         "bear",       "beaver",
          "bed",          "bee",           "beetle",       "bicycle",    "bottle",
          "bowl",         "boy",           "bridge",       "bus",        "butterfly",
          "camel",        "can",           "castle",       "caterpillar", "cattle",
          "chair",        "chimpanzee",    "clock",        "cloud",      "cockroach",
          "couch",        "crab",          "crocodile",    "cup",        "dinosaur",
          "dolphin",      "elephant",      "flatfish",     "forest",     "fox",
          "girl",         "hamster",       "house",        "kangaroo",   "keyboard",
          "lamp",         "lawn_mower",    "leopard",      "lion",       "lizard",
          "lobster",      "man",           "maple_tree",   "motorcycle", "mountain",
          "mouse",        "mushroom",      "oak_tree",     "orange",     "orchid",
          "otter",        "palm_tree",     "pear",         "pickup_truck", "pine_tree",
          "plain",        "plate",         "poppy",        "porcupine",  "possum",
          "rabbit",       "raccoon",       "ray",          "road",       "rocket",
          "rose",         "sea",           "seal",         "shark",      "shrew",
          "skunk",        "skyscraper",    "snail",        "snake",      "spider",
          "squirrel",     "streetcar",     "sunflower",    "sweet_pepper", "table",
          "tank",         "telephone",     "television",   "tiger",      "tractor",
          "train",        "trout",         "tulip",        "turtle",     "wardrobe",
          "whale",        "willow_tree",   "wolf",         "woman",      "worm"};
}

std::vector<std::string> cifar100_coarse_names() {
  return {"aquatic_mammals",
          "fish",
          "flowers",
          "food_containers",
          "fruit_and_vegetables",
          "household_electrical_devices",
          "household_furniture",
          "insects",
          "large_carnivores",
          "large_man-made_outdoor_things",
          "large_natural_outdoor_scenes",
          "large_omnivores_and_herbivores",
          "medium_mammals",
          "non-insect_invertebrates",
          "people",
          "reptiles",
          "small_mammals",
          "trees",
          "vehicles_1",
          "vehicles_2"};
}

DataSplits load_splits(const std::vector<std::string>& train_paths,
                       const std::string& test_path, const Layout& layout,
                       std::vector<std::string> class_names) {
  DataSplits splits;
  splits.train = load_batches(train_paths, layout);
  splits.test = load_batches({test_path}, layout);
  // Fixed by the format, not by the largest label seen: a small subset must still give a
  // model with every class.
  for (Dataset* split : {&splits.train, &splits.test}) {
    split->num_classes = layout.label_classes[layout.used_label];
    split->class_names = class_names;
  }
  return splits;
}

}  // namespace

DataSplits load_cifar10_dir(const std::string& dir) {
  const Layout layout = cifar10_layout();
  const fs::path root = batch_dir(dir, layout, "data_batch_1.bin");
  std::vector<std::string> train_paths;
  for (int i = 1; i <= 5; ++i)
    train_paths.push_back(
        find_required_batch(root, "data_batch_" + std::to_string(i) + ".bin", layout));
  std::string test_path = find_required_batch(root, "test_batch.bin", layout);
  std::vector<std::string> names = read_class_names(root / "batches.meta.txt", 10);
  return load_splits(train_paths, test_path, layout, names.empty() ? cifar10_names() : names);
}

DataSplits load_cifar100_dir(const std::string& dir, Cifar100Label label) {
  const Layout layout = cifar100_layout(label);
  const fs::path root = batch_dir(dir, layout, "train.bin");
  std::string train_path = find_required_batch(root, "train.bin", layout);
  std::string test_path = find_required_batch(root, "test.bin", layout);
  const bool coarse = label == Cifar100Label::coarse;
  std::vector<std::string> names =
      read_class_names(root / (coarse ? "coarse_label_names.txt" : "fine_label_names.txt"),
                       coarse ? 20 : 100);
  if (names.empty()) names = coarse ? cifar100_coarse_names() : cifar100_fine_names();
  return load_splits({train_path}, test_path, layout, names);
}

}  // namespace minivit
