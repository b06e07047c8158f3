#pragma once
// Shared test helpers: a scratch directory per test, and running the minivit program.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "minivit/core/config.h"

namespace minivit_test {

// A fresh empty directory under the system temp dir, removed when the object dies.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    path = std::filesystem::temp_directory_path() /
           ("minivit_test_" + tag + "_" + std::to_string(::getpid()) + "_" +
            std::to_string(counter()++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string str(const std::string& child = "") const {
    return child.empty() ? path.string() : (path / child).string();
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

struct RunResult {
  int exit_code;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs a shell command line, stdin empty, and collects its exit code and both outputs.
RunResult run_command(const std::string& command_line);

// Runs the minivit executable with `args` (already shell-quoted as needed).
RunResult run_minivit(const std::string& args);

// Starts the minivit executable with `args` (one argument each, no shell) in the background,
// its stderr into `stderr_path` and its stdout discarded; returns its process id.
pid_t spawn_minivit(const std::vector<std::string>& args, const std::string& stderr_path);

}  // namespace minivit_test

namespace minivit_test {

// Writes a small learnable dataset as raw IDX files into `dir` (train-*/t10k-* names):
// size x size grey images, class k marked by a bright square at a class-specific position
// over seeded noise.
void write_tiny_idx_dataset(const std::string& dir, int n_train, int n_test, int size,
                            int classes, uint64_t seed = 1);

// A TOML config for a tiny model on that dataset; `extra` is appended (more keys).
std::string tiny_config_toml(const std::string& data_dir, const std::string& out_dir,
                             int size = 8, int classes = 4);

// A finished `minivit train` of that tiny model on that dataset (320 training and 96 test
// images of size x size pixels, 4 classes), for the tests that only read a run: `dir` holds
// the data (`data`), the config (`config`) and the run directory (`out`, its last checkpoint
// `ckpt`); `train_args` follow the config on the command line.
struct TinyTrainedRun {
  TempDir dir;
  std::string data, config, out, ckpt;
  RunResult train;
  TinyTrainedRun(const std::string& tag, int size, const std::string& train_args = "");
};

void write_text(const std::string& path, const std::string& text);

// The config keys a dataset script printed (datasets/cifar10.sh and friends), from "[model]"
// on, with the sizes a model needs besides them, parsed as a config.
minivit::Config printed_config(const std::string& script_output);

std::string read_text(const std::string& path);

// Every tensor of a safetensors file, in file order, as one run of floats: two files'
// values compare bit for bit with ==.
std::vector<float> tensor_values(const std::string& path);

// Binary files for the data readers: `bytes` as they are, or gzip-compressed; and a file's
// bytes as they are on disk.
void write_raw(const std::string& path, const std::string& bytes);
void write_gz(const std::string& path, const std::string& bytes);
std::string read_raw(const std::string& path);

// The message of the minivit::Error that `action` throws; the test fails if it throws none.
std::string error_of(const std::function<void()>& action);

}  // namespace minivit_test
