#pragma once
// Crash-safe file writing: every output goes to a temporary name in the same directory,
// is flushed to disk, then renamed over the target, so a reader sees the old file or the
// new one, never half of one.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace minivit {

// Writes `bytes` to `path` atomically. Throws minivit::Error naming the path on failure.
void write_file_atomic(const std::string& path, std::string_view bytes);

// Reads a whole file; throws minivit::Error naming the path if it cannot be read.
std::string read_file(const std::string& path);

// Creates `dir` (and parents) if needed and checks that it is writable.
void ensure_writable_dir(const std::string& dir);

bool file_exists(const std::string& path);

// Removes "NAME.tmp.PID" files in `dir` whose writer process no longer exists (killed
// mid-write); returns how many were removed. Files of live processes are left alone.
int remove_stale_temporaries(const std::string& dir);

}  // namespace minivit
