#pragma once
// A data file that may be gzip-compressed or raw, read through zlib (which passes a file
// that is not gzip through unchanged), so every loader takes `name` and `name.gz` alike.
// Every error is a minivit::Error that leads with the file's path.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

struct gzFile_s;  // zlib's file handle; zlib.h stays out of this header

namespace minivit {

class ByteReader {
 public:
  // Opens `path`. The caller says what it expects there, in the words of its messages:
  // "PATH: no such file (expected EXPECTED_FILE)", "PATH: is a directory, expected
  // EXPECTED_CONTENTS"; any other failure says why the file cannot be read or opened.
  ByteReader(std::string path, const std::string& expected_file,
             const std::string& expected_contents);
  ~ByteReader();
  ByteReader(const ByteReader&) = delete;
  ByteReader& operator=(const ByteReader&) = delete;

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }  // on disk, compressed or not
  bool is_gzip() const { return is_gzip_; }

  // Throws minivit::Error("PATH: " + message).
  [[noreturn]] void fail(const std::string& message) const;

  // Reads up to n bytes; fewer only where the data ends. Corrupt gzip data throws
  // "PATH: corrupt gzip data (zlib: ...)".
  size_t read_some(uint8_t* dst, size_t n);

  // Reads what is left without storing it (it may be large); returns how many bytes.
  uint64_t skip_to_end();

  // Back to the first byte, e.g. after counting a gzip file's decompressed size.
  void rewind();

  // Whether a gzip stream stopped short of its end marker, as a cut-off download does.
  bool stream_cut_short();

  // Throws "PATH: truncated gzip data (zlib: ...)" when stream_cut_short().
  void check_stream_end();

  // zlib's last error without the "PATH: " it puts in front, as our messages lead with it.
  std::string zlib_message();

 private:
  std::string path_;
  gzFile_s* gz_ = nullptr;
  uint64_t file_size_ = 0;
  bool is_gzip_ = false;
};

// dir / name if anything is there, else dir / (name + ".gz") if anything is there, else
// empty. Anything counts, even a directory or a broken link, so that opening it says what
// is wrong with it instead of calling it missing.
std::string find_raw_or_gzip(const std::filesystem::path& dir, const std::string& name);

}  // namespace minivit
