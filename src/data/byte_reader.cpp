#include "minivit/data/byte_reader.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "minivit/core/error.h"

namespace minivit {

namespace fs = std::filesystem;

ByteReader::ByteReader(std::string path, const std::string& expected_file,
                       const std::string& expected_contents)
    : path_(std::move(path)) {
  std::error_code ec;
  fs::file_status status = fs::status(path_, ec);
  if (status.type() == fs::file_type::not_found)
    fail("no such file (expected " + expected_file + ")");
  if (ec) fail("cannot read (" + ec.message() + ")");
  if (fs::is_directory(status)) fail("is a directory, expected " + expected_contents);
  // A dataset is read more than once (its size first, a gzip stream may be rewound), so it
  // must be a file on disk, not a pipe or a device that could also never end.
  if (!fs::is_regular_file(status))
    fail("is not a regular file (a pipe, a FIFO or a device), expected " + expected_contents +
         " on disk");
  file_size_ = fs::file_size(path_, ec);
  if (ec) fail("cannot read (" + ec.message() + ")");
  gz_ = gzopen(path_.c_str(), "rb");
  if (!gz_) fail(std::string("cannot open (") + std::strerror(errno) + ")");
  // Large reads go straight into the caller's buffers; a bigger internal buffer cuts
  // syscalls. It must be set before gzdirect, which makes zlib allocate its buffers.
  gzbuffer(gz_, 1 << 17);
  is_gzip_ = gzdirect(gz_) == 0;
}

ByteReader::~ByteReader() {
  if (gz_) gzclose(gz_);
}

void ByteReader::fail(const std::string& message) const { throw Error(path_ + ": " + message); }

size_t ByteReader::read_some(uint8_t* dst, size_t n) {
  size_t total = 0;
  while (total < n) {
    // gzread takes an unsigned count and returns an int.
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - total, 1u << 30));
    int got = gzread(gz_, dst + total, chunk);
    if (got < 0) fail("corrupt gzip data (zlib: " + zlib_message() + ")");
    total += static_cast<size_t>(got);
    if (static_cast<unsigned>(got) < chunk) break;
  }
  return total;
}

uint64_t ByteReader::skip_to_end() {
  std::array<uint8_t, 1 << 16> scratch;
  uint64_t skipped = 0;
  for (;;) {
    size_t got = read_some(scratch.data(), scratch.size());
    skipped += got;
    if (got < scratch.size()) return skipped;
  }
}

void ByteReader::rewind() {
  if (gzrewind(gz_) != 0) fail("cannot rewind gzip stream (zlib: " + zlib_message() + ")");
}

bool ByteReader::stream_cut_short() {
  int errnum = Z_OK;
  gzerror(gz_, &errnum);
  return errnum != Z_OK && errnum != Z_STREAM_END;
}

void ByteReader::check_stream_end() {
  if (stream_cut_short()) fail("truncated gzip data (zlib: " + zlib_message() + ")");
}

std::string ByteReader::zlib_message() {
  int errnum = Z_OK;
  const char* msg = gzerror(gz_, &errnum);
  std::string text = msg ? msg : "";
  if (text.rfind(path_ + ": ", 0) == 0) text.erase(0, path_.size() + 2);
  return text;
}

std::string find_raw_or_gzip(const fs::path& dir, const std::string& name) {
  // Both can exist after `gunzip -k`; the uncompressed one reads faster.
  for (const std::string& candidate : {name, name + ".gz"}) {
    std::error_code ec;
    if (fs::symlink_status(dir / candidate, ec).type() != fs::file_type::not_found && !ec)
      return (dir / candidate).string();
  }
  return "";
}

}  // namespace minivit
