#include "minivit/data/idx.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "minivit/core/error.h"
#include "minivit/data/byte_reader.h"

namespace minivit {

namespace fs = std::filesystem;

namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned byte, 3 dims (N, H, W)
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned byte, 1 dim (N)

// Deflate cannot expand data by more than about 1032:1, so a gzip file of S bytes holds
// at most S * 1032 bytes. A header claiming more is lying, and we can say so before
// allocating anything.
constexpr uint64_t kMaxGzipRatio = 1032;

// Gzip payloads start this small and double, so a header that overstates N costs memory
// only for the data that really arrives.
constexpr size_t kFirstGzipChunk = size_t{4} << 20;

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

uint32_t big_endian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// One IDX file, raw or gzip: its header, then its payload.
class IdxFile {
 public:
  IdxFile(const std::string& path, const std::string& what)
      : file_(path, "an IDX " + what + " file", "an IDX " + what + " file"), what_(what) {}

  [[noreturn]] void fail(const std::string& msg) const { file_.fail(msg); }

  // Reads the magic number and dims, checking them against what the caller expects.
  std::vector<uint32_t> read_header(uint32_t expected_magic, const char* dim_names) {
    std::array<uint8_t, 4> word{};
    size_t got = file_.read_some(word.data(), word.size());
    if (got < word.size())
      fail("too short for an IDX header (" + std::to_string(got) + " bytes; expected an IDX " +
           what_ + " file)");
    uint32_t magic = big_endian32(word.data());
    size_t expected_dims = expected_magic & 0xff;
    // Bytes 0-1 are always zero and byte 2 is the element type (0x08 = unsigned byte);
    // anything else is not an IDX ubyte file at all, e.g. an HTML error page.
    bool idx_ubyte = (magic & 0xffffff00) == 0x00000800;
    if (!idx_ubyte)
      fail("bad magic number: expected " + hex32(expected_magic) + " (IDX " + what_ +
           ", unsigned bytes), got " + hex32(magic));
    size_t num_dims = magic & 0xff;
    if (num_dims != expected_dims) {
      std::string hint = magic == kLabelsMagic   ? " (this looks like a labels file)"
                         : magic == kImagesMagic ? " (this looks like an images file)"
                                                 : "";
      fail("expected " + std::to_string(expected_dims) + " dims " + dim_names + " (magic " +
           hex32(expected_magic) + "), got " + std::to_string(num_dims) + " (magic " +
           hex32(magic) + ")" + hint);
    }
    std::vector<uint32_t> dims(num_dims);
    for (size_t i = 0; i < num_dims; ++i) {
      if (file_.read_some(word.data(), word.size()) < word.size())
        fail("truncated IDX header: expected " + std::to_string(num_dims) + " dims " +
             dim_names + ", file ends after " + std::to_string(i));
      dims[i] = big_endian32(word.data());
      if (dims[i] == 0)
        fail("IDX header has a zero dimension (dim " + std::to_string(i) + " of " + dim_names +
             "); expected all dims >= 1");
    }
    header_bytes_ = 4 + 4 * num_dims;
    return dims;
  }

  // Reads exactly `expected` payload bytes and checks nothing follows them. `claim`
  // describes the header's promise for messages, e.g. "60000 images of 28x28".
  std::vector<uint8_t> read_payload(uint64_t expected, const std::string& claim,
                                    const char* data_kind) {
    std::string says = "header says " + claim + " (" + std::to_string(expected) + " bytes of " +
                       data_kind + " data)";
    if (!file_.is_gzip()) {
      uint64_t held = file_.file_size() - header_bytes_;
      if (held < expected)
        fail("truncated: " + says + ", file holds " + std::to_string(held) + " bytes of " +
             data_kind + " data");
      if (held > expected)
        fail(std::to_string(held - expected) + " unexpected trailing bytes: " + says +
             ", file holds " + std::to_string(held));
    } else {
      uint64_t most = file_.file_size() * kMaxGzipRatio;
      if (expected + header_bytes_ > most)
        fail("implausible header: " + says + ", but a gzip file of " +
             std::to_string(file_.file_size()) + " bytes can hold at most " +
             std::to_string(most) + " bytes");
    }
    if (expected > SIZE_MAX / 2) fail("implausible header: " + says + ", too large for memory");

    std::vector<uint8_t> data;
    size_t want = static_cast<size_t>(expected);
    // A raw file's size was checked above, so its payload can be allocated in one go.
    data.resize(file_.is_gzip() ? std::min(want, kFirstGzipChunk) : want);
    size_t have = 0;
    while (have < want) {
      if (have == data.size()) data.resize(std::min(want, 2 * data.size()));
      size_t asked = data.size() - have;
      size_t got = file_.read_some(data.data() + have, asked);
      have += got;
      if (got < asked) break;  // end of data
    }
    if (have < want)
      fail("truncated: " + says + ", file holds " + std::to_string(have) + " bytes of " +
           data_kind + " data" + stream_note());

    uint64_t extra = file_.skip_to_end();
    if (extra > 0)
      fail(std::to_string(extra) + " unexpected trailing bytes: " + says + ", file holds " +
           std::to_string(expected + extra));
    return data;
  }

 private:
  // Why a gzip stream stopped early, e.g. "unexpected end of file"; empty if it did not.
  std::string stream_note() {
    return file_.stream_cut_short() ? " (gzip: " + file_.zlib_message() + ")" : "";
  }

  ByteReader file_;
  std::string what_;
  uint64_t header_bytes_ = 0;
};

uint64_t checked_product(const std::vector<uint32_t>& dims, const IdxFile& file) {
  uint64_t product = 1;
  for (uint32_t d : dims)
    if (__builtin_mul_overflow(product, uint64_t{d}, &product))
      file.fail("implausible header: dims overflow 64 bits");
  return product;
}

xt::xtensor<uint8_t, 4> load_images(const std::string& path) {
  IdxFile file(path, "images");
  std::vector<uint32_t> dims = file.read_header(kImagesMagic, "(N, H, W)");
  uint64_t bytes = checked_product(dims, file);
  std::string claim = std::to_string(dims[0]) + " images of " + std::to_string(dims[1]) + "x" +
                      std::to_string(dims[2]);
  std::vector<uint8_t> pixels = file.read_payload(bytes, claim, "pixel");
  xt::xtensor<uint8_t, 4> images({dims[0], size_t{1}, dims[1], dims[2]});
  std::copy(pixels.begin(), pixels.end(), images.data());
  return images;
}

std::vector<int32_t> load_labels(const std::string& path) {
  IdxFile file(path, "labels");
  std::vector<uint32_t> dims = file.read_header(kLabelsMagic, "(N)");
  std::vector<uint8_t> bytes =
      file.read_payload(dims[0], std::to_string(dims[0]) + " labels", "label");
  return std::vector<int32_t>(bytes.begin(), bytes.end());
}

std::vector<std::string> digit_names(int num_classes) {
  std::vector<std::string> names;
  for (int k = 0; k < num_classes; ++k) names.push_back(std::to_string(k));
  return names;
}

int max_label(const std::vector<int32_t>& labels) {
  return labels.empty() ? -1 : *std::max_element(labels.begin(), labels.end());
}

// The directory's own name, also for "data/fashion/" and ".".
std::string lowercase_dir_name(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::path(dir), ec);
  if (ec) p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  std::string name = p.filename().string();
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

}  // namespace

Dataset load_idx_pair(const std::string& images_path, const std::string& labels_path) {
  Dataset ds;
  ds.images = load_images(images_path);
  ds.labels = load_labels(labels_path);
  if (static_cast<size_t>(ds.images.shape(0)) != ds.labels.size())
    throw Error("image/label count mismatch: " + images_path + " holds " +
                std::to_string(ds.images.shape(0)) + " images but " + labels_path + " holds " +
                std::to_string(ds.labels.size()) + " labels");
  ds.num_classes = max_label(ds.labels) + 1;
  ds.class_names = digit_names(ds.num_classes);
  return ds;
}

DataSplits load_idx_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(dir + ": no such directory (expected an IDX dataset directory)");
  const std::array<std::string, 4> names = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                            "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
  std::array<std::string, 4> paths;
  for (size_t i = 0; i < names.size(); ++i) {
    paths[i] = find_raw_or_gzip(dir, names[i]);
    if (paths[i].empty())
      throw Error(dir + ": missing " + names[i] + "[.gz]; an IDX dataset directory needs " +
                  names[0] + ", " + names[1] + ", " + names[2] + " and " + names[3] +
                  " (each optionally .gz)");
  }
  DataSplits splits;
  splits.train = load_idx_pair(paths[0], paths[1]);
  splits.test = load_idx_pair(paths[2], paths[3]);
  if (splits.train.height() != splits.test.height() ||
      splits.train.width() != splits.test.width())
    throw Error(dir + ": train images are " + std::to_string(splits.train.height()) + "x" +
                std::to_string(splits.train.width()) + " but test images are " +
                std::to_string(splits.test.height()) + "x" + std::to_string(splits.test.width()) +
                "; both splits must have the same image size");

  int num_classes = std::max(splits.train.num_classes, splits.test.num_classes);
  std::vector<std::string> class_names = digit_names(num_classes);
  if (num_classes == 10 && lowercase_dir_name(dir).find("fashion") != std::string::npos)
    class_names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                   "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  for (Dataset* split : {&splits.train, &splits.test}) {
    split->num_classes = num_classes;
    split->class_names = class_names;
  }
  return splits;
}

}  // namespace minivit
