#pragma once
// Crash-safe file writing: every output goes to a temporary name in the same directory,
// is flushed to disk, then renamed over the target, so a reader sees the old file or the
// new one, never half of one.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace minivit {

// Writes `bytes` to `path` atomically, through "PATH.tmp.PID.XXXXXX": created exclusively
// (O_EXCL) without following links, under a random suffix, so nobody who can write the
// directory can make minivit write elsewhere by planting a link at the temporary name.
// Throws minivit::Error naming the path on failure.
void write_file_atomic(const std::string& path, std::string_view bytes);

// "-" names standard input wherever one input file is expected.
inline bool is_stdin_path(const std::string& path) { return path == "-"; }

// An input opened once and read once, front to back: a regular file, or a stream (a pipe, a
// FIFO, /dev/stdin, a device, "-" for standard input) that can be read only once and may
// never end. Readers of streams stop at the size their format declares, so an endless or
// oversized stream fails on its first bytes instead of filling memory.
class InputFile {
 public:
  // Throws minivit::Error "PATH: cannot open (...)" or "PATH: is a directory, ...".
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // The path, or "standard input" for "-": what messages name.
  const std::string& name() const { return name_; }
  bool regular() const { return regular_; }
  // The size of a regular file (0 for a stream).
  uint64_t size() const { return size_; }

  // Up to `n` more bytes: fewer only where the input ends.
  std::string read_up_to(uint64_t n);
  // Exactly `n` more bytes; throws "NAME: truncated: WHAT needs N bytes, the input ended
  // after M" when the input ends first.
  std::string read_exact(uint64_t n, const std::string& what);
  // Everything up to the end: a regular file whole, a stream up to `stream_cap` bytes;
  // throws "NAME: ... more than CAP bytes" past the cap.
  std::string read_rest(uint64_t stream_cap, const std::string& what);
  // Whether the input has ended (a stream is read one byte further to tell; that byte is
  // kept for the next read).
  bool at_end();

 private:
  size_t read_some(char* dst, size_t n);

  int fd_ = -1;
  bool owned_ = false;
  bool regular_ = false;
  uint64_t size_ = 0;
  uint64_t position_ = 0;
  std::string pending_;  // a byte at_end() read ahead
  std::string name_;
};

// Most bytes read_file takes from a stream; regular files are read whole.
constexpr uint64_t kStreamCapBytes = uint64_t(64) << 20;

// Reads a whole input ("-": standard input), a stream up to `stream_cap` bytes; throws
// minivit::Error naming the path if it cannot be read or is longer.
std::string read_file(const std::string& path, uint64_t stream_cap = kStreamCapBytes);

// "PATH.tmp.PID.XXXXXX" with six random characters: a temporary name nobody can predict,
// which remove_stale_temporaries recognises.
std::string temporary_name(const std::string& path);

// Flushes the directory that holds `path` (fsync), so that a file or tree renamed into it
// stays there through a crash.
void sync_parent_directory(const std::string& path);

// Creates `dir` (and parents) if needed and checks that it is writable.
void ensure_writable_dir(const std::string& dir);

// dir/name.
std::string path_in(const std::string& dir, const std::string& name);

bool file_exists(const std::string& path);

// Removes "NAME.tmp.PID.XXXXXX" (and "NAME.tmp.PID") files in `dir` whose writer process no
// longer exists (killed mid-write); returns how many were removed. Files of live processes
// are left alone.
int remove_stale_temporaries(const std::string& dir);

}  // namespace minivit
