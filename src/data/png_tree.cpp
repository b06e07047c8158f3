#include "minivit/data/png_tree.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/core/progress.h"
#include "minivit/data/folder.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

namespace minivit {

namespace fs = std::filesystem;

namespace {

// Images are encoded and written in parallel in blocks of this many, with the progress
// line updated between blocks.
constexpr int64_t kBlock = 1024;

void append_to_string(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), size_t(size));
}

// planar (C, H, W) -> PNG bytes (grey for 1 channel, RGB for 3); empty if stb fails.
std::string encode_png(const uint8_t* planar, int channels, int height, int width) {
  const size_t plane = size_t(height) * size_t(width);
  std::vector<uint8_t> interleaved(plane * size_t(channels));  // (H, W, C), as PNG stores it
  for (size_t i = 0; i < plane; ++i)
    for (size_t c = 0; c < size_t(channels); ++c) interleaved[i * size_t(channels) + c] = planar[c * plane + i];
  std::string png;
  if (!stbi_write_png_to_func(append_to_string, &png, width, height, channels, interleaved.data(),
                              width * channels))
    png.clear();
  return png;
}

// "" or why it failed. No temporary name or fsync: the tree as a whole is renamed into
// place after one flush (see the top of the file).
std::string write_plain(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return std::string("cannot write (") + std::strerror(errno) + ")";
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      return std::string("write failed (") + std::strerror(e) + ")";
    }
    p += n;
    left -= size_t(n);
  }
  if (::close(fd) != 0) return std::string("write failed (") + std::strerror(errno) + ")";
  return "";
}

// Flushes every file written under `dir` (one syncfs for the filesystem instead of one
// fsync per file).
void flush_tree(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error(dir.string() + ": cannot open to flush (" + std::strerror(errno) + ")");
  const int rc = ::syncfs(fd);
  const int e = errno;
  ::close(fd);
  if (rc != 0) throw Error(dir.string() + ": flush failed (" + std::strerror(e) + ")");
}

// Removes "NAME.tmp.PID.XXXXXX" (and "NAME.tmp.PID") trees in `parent` left by exports that
// were killed.
void remove_stale_trees(const fs::path& parent, const std::string& name) {
  std::error_code ec;
  const std::string prefix = name + ".tmp.";
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string entry_name = entry.path().filename().string();
    if (entry_name.rfind(prefix, 0) != 0) continue;
    std::string pid_text = entry_name.substr(prefix.size());
    pid_text = pid_text.substr(0, pid_text.find('.'));
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(pid_text.c_str(), nullptr, 10);
    if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), ec);
  }
}

// Removes the temporary tree unless the export got as far as renaming it.
struct TemporaryTree {
  fs::path path;
  bool done = false;
  ~TemporaryTree() {
    std::error_code ec;
    if (!done) fs::remove_all(path, ec);
  }
};

// Creates OUT.tmp.PID.XXXXXX with mkdir, which fails on anything already there (a planted
// link included), so the tree is written nowhere but in a directory of its own.
TemporaryTree create_temporary_tree(const fs::path& out) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    const std::string candidate = temporary_name(out.string());
    if (::mkdir(candidate.c_str(), 0755) == 0) return TemporaryTree{candidate};
    if (errno != EEXIST)
      throw Error(candidate + ": cannot create (" + std::strerror(errno) + ")");
  }
  throw Error(out.string() + ": cannot create a temporary directory beside it");
}

// The tree's final path: absolute, without a trailing slash.
fs::path tree_path(const std::string& out_dir) {
  fs::path out = fs::absolute(fs::path(out_dir)).lexically_normal();
  if (out.filename().empty()) out = out.parent_path();  // "dir/" -> "dir"
  return out;
}

}  // namespace

void prepare_png_tree(const std::string& out_dir) {
  const fs::path out = tree_path(out_dir);
  std::error_code ec;
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec)) throw Error(out_dir + ": exists and is not a directory");
    const bool empty = fs::is_empty(out, ec);
    if (ec) throw Error(out_dir + ": cannot read (" + ec.message() + ")");
    if (!empty)
      throw Error(out_dir + ": already holds files; export writes into a new or empty directory");
  }
  const fs::path parent = out.parent_path();
  fs::create_directories(parent, ec);
  if (ec) throw Error(parent.string() + ": cannot create (" + ec.message() + ")");
  remove_stale_trees(parent, out.filename().string());
}

std::vector<std::string> class_folders_for(const Dataset& data) {
  std::vector<std::string> folders;
  std::map<std::string, std::string> taken;  // folder -> class that has it
  const std::vector<std::string> names = class_names_for(data.class_names, data.num_classes);
  for (int k = 0; k < data.num_classes; ++k) {
    const std::string& name = names[size_t(k)];
    const std::string folder = class_folder_name(name);
    const auto [it, fresh] = taken.emplace(folder, name);
    if (!fresh)
      throw Error("class names '" + it->second + "' and '" + name + "' both become the folder name '" +
                  folder + "'; give distinct names with --set data.class_names=[...]");
    folders.push_back(folder);
  }
  return folders;
}


namespace {

// One split's images into `root`/<split>/<class>/, in blocks on the pool; `written` counts
// across splits for the progress calls.
void write_split(const fs::path& root, const PngTreeSplit& split,
                 const std::vector<std::string>& class_folders, const std::string& source,
                 const std::string& out_dir, int64_t& written, int64_t total,
                 const std::function<void(const PngTreeProgress&)>& progress) {
  const std::string& split_name = split.name;
  const Dataset& d = *split.data;
  const int64_t n = d.size();
  if (n == 0) return;
  for (int32_t label : d.labels)
    if (label < 0 || label >= int32_t(class_folders.size()))
      throw Error(source + " (" + split_name + " split): label " + std::to_string(label) +
                  " has no class name (" + std::to_string(class_folders.size()) + " classes)");
  std::vector<bool> present(class_folders.size(), false);
  for (int32_t label : d.labels) present[size_t(label)] = true;
  std::error_code ec;
  for (size_t k = 0; k < class_folders.size(); ++k)
    if (present[k]) {
      fs::create_directories(root / split_name / class_folders[k], ec);
      if (ec)
        throw Error((root / split_name / class_folders[k]).string() + ": cannot create (" +
                    ec.message() + ")");
    }

  // Zero-padded so that sorted file names (the folder loader's order) are index order.
  const int digits = std::max(5, int(std::to_string(n - 1).size()));
  const int C = d.channels(), H = d.height(), W = d.width();
  const size_t image_len = size_t(C) * size_t(H) * size_t(W);
  const std::string split_dir = (root / split_name).string() + "/";
  std::vector<std::string> errors(size_t(std::min(n, kBlock)));
  for (int64_t block = 0; block < n; block += kBlock) {
    const int64_t count = std::min(kBlock, n - block);
    std::atomic<bool> failed{false};
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t j = 0; j < count; ++j) {
      const int64_t i = block + j;
      try {  // nothing may leave an OpenMP region as an exception
        const std::string path = split_dir + class_folders[size_t(d.labels[size_t(i)])] + "/" +
                                 strprintf("%0*lld.png", digits, (long long)i);
        const std::string png = encode_png(d.images.data() + size_t(i) * image_len, C, H, W);
        const std::string error = png.empty() ? "PNG encoding failed" : write_plain(path, png);
        if (!error.empty()) {
          errors[size_t(j)] = path + ": " + error;
          failed = true;
        }
      } catch (...) {
        failed = true;
      }
    }
    if (failed) {
      for (int64_t j = 0; j < count; ++j)
        if (!errors[size_t(j)].empty()) throw Error(errors[size_t(j)]);
      throw Error(out_dir + ": out of memory while writing images");
    }
    written += count;
    progress({split_name, block + count, n, written, total});
  }
}

}  // namespace

void write_png_tree(const std::string& out_dir, const std::vector<PngTreeSplit>& splits,
                    const std::vector<std::string>& class_folders, const std::string& source,
                    const std::function<void(const PngTreeProgress&)>& progress) {
  const fs::path out = tree_path(out_dir);
  const fs::path parent = out.parent_path();
  TemporaryTree tree = create_temporary_tree(parent / out.filename());
  int64_t written = 0, total = 0;
  for (const PngTreeSplit& split : splits) total += split.data->size();
  for (const PngTreeSplit& split : splits)
    write_split(tree.path, split, class_folders, source, out_dir, written, total, progress);

  std::error_code ec;
  flush_tree(tree.path);
  if (fs::exists(out, ec)) fs::remove(out, ec);  // empty (checked above); rename needs it gone
  fs::rename(tree.path, out, ec);
  if (ec) throw Error(out_dir + ": cannot move the finished export into place (" + ec.message() + ")");
  tree.done = true;
  sync_parent_directory(out.string());
}

}  // namespace minivit
