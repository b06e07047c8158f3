#include "minivit/core/fileio.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "minivit/core/error.h"

namespace minivit {

namespace fs = std::filesystem;

void sync_parent_directory(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

std::string path_in(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

namespace {

// Six characters from [a-z0-9] drawn from the kernel's random source: a temporary name
// nobody can predict.
std::string random_suffix() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device device;
  std::string suffix;
  for (int i = 0; i < 6; ++i) suffix += kAlphabet[device() % (sizeof kAlphabet - 1)];
  return suffix;
}

// Creates PATH.tmp.PID.XXXXXX exclusively, never through a link; returns its descriptor,
// or -1 with errno set.
int create_temporary(const std::string& path, std::string& tmp) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    tmp = temporary_name(path);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

}  // namespace

std::string temporary_name(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid()) + "." + random_suffix();
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  std::string tmp;
  int fd = create_temporary(path, tmp);
  if (fd < 0) throw Error(path + ": cannot write (" + std::strerror(errno) + ")");
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(path + ": write failed (" + std::strerror(e) + ")");
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw Error(path + ": flush failed (" + std::strerror(e) + ")");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw Error(path + ": rename failed (" + std::strerror(e) + ")");
  }
  sync_parent_directory(path);
}

InputFile::InputFile(const std::string& path)
    : name_(is_stdin_path(path) ? "standard input" : path) {
  if (is_stdin_path(path)) {
    fd_ = STDIN_FILENO;
  } else {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw Error(name_ + ": cannot open (" + std::strerror(errno) + ")");
    owned_ = true;
  }
  struct stat info {};
  const bool stat_failed = ::fstat(fd_, &info) != 0;
  const int stat_errno = errno;
  if (stat_failed || S_ISDIR(info.st_mode)) {
    if (owned_) ::close(fd_);
    if (stat_failed) throw Error(name_ + ": cannot read (" + std::strerror(stat_errno) + ")");
    throw Error(name_ + ": is a directory, expected a file");
  }
  regular_ = S_ISREG(info.st_mode);
  size_ = regular_ ? uint64_t(info.st_size) : 0;
}

InputFile::~InputFile() {
  if (owned_) ::close(fd_);
}

size_t InputFile::read_some(char* dst, size_t n) {
  size_t total = 0;
  if (!pending_.empty() && n > 0) {
    dst[0] = pending_[0];
    pending_.clear();
    total = 1;
  }
  while (total < n) {
    const ssize_t got = ::read(fd_, dst + total, n - total);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw Error(name_ + ": read failed (" + std::strerror(errno) + ")");
    }
    if (got == 0) break;
    total += size_t(got);
  }
  position_ += total;
  return total;
}

std::string InputFile::read_up_to(uint64_t n) {
  // In pieces, so that a length no stream delivers costs memory only as bytes arrive.
  constexpr uint64_t kPiece = uint64_t(1) << 24;
  std::string bytes;
  while (bytes.size() < n) {
    const size_t want = size_t(std::min(kPiece, n - bytes.size()));
    const size_t old = bytes.size();
    bytes.resize(old + want);
    const size_t got = read_some(bytes.data() + old, want);
    bytes.resize(old + got);
    if (got < want) break;
  }
  return bytes;
}

std::string InputFile::read_exact(uint64_t n, const std::string& what) {
  std::string bytes = read_up_to(n);
  if (bytes.size() < n)
    throw Error(name_ + ": truncated: " + what + " needs " + std::to_string(n) +
                " bytes, the input ended after " + std::to_string(bytes.size()));
  return bytes;
}

std::string InputFile::read_rest(uint64_t stream_cap, const std::string& what) {
  std::string bytes;
  if (regular_ && size_ > position_) bytes.reserve(size_t(size_ - position_));
  char piece[1 << 16];
  for (;;) {
    const size_t got = read_some(piece, sizeof piece);
    if (got == 0) return bytes;
    if (!regular_ && bytes.size() + got > stream_cap)
      throw Error(name_ + ": " + what + " longer than the " + std::to_string(stream_cap) +
                  " bytes read from a stream (a pipe, a device or standard input)");
    bytes.append(piece, got);
  }
}

bool InputFile::at_end() {
  if (!pending_.empty()) return false;
  if (regular_) return position_ >= size_;
  char byte = 0;
  if (read_some(&byte, 1) == 0) return true;
  --position_;
  pending_.assign(1, byte);
  return false;
}

std::string read_file(const std::string& path, uint64_t stream_cap) {
  InputFile in(path);
  return in.read_rest(stream_cap, "the input is");
}

void ensure_writable_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(dir + ": cannot create output directory (" + ec.message() + ")");
  if (!fs::is_directory(dir)) throw Error(dir + ": exists but is not a directory");
  if (::access(dir.c_str(), W_OK) != 0)
    throw Error(dir + ": output directory is not writable (" + std::strerror(errno) + ")");
}

bool file_exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

int remove_stale_temporaries(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t at = name.rfind(".tmp.");
    if (at == std::string::npos) continue;
    // "PID.XXXXXX", or "PID" as older versions named them.
    std::string pid_text = name.substr(at + 5);
    pid_text = pid_text.substr(0, pid_text.find('.'));
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(pid_text.c_str(), nullptr, 10);
    if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH) {
      fs::remove(entry.path(), ec);
      removed += !ec;
    }
  }
  return removed;
}

}  // namespace minivit
