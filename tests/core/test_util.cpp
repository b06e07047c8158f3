#include "test_util.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "minivit/core/error.h"
#include "minivit/core/rng.h"
#include "minivit/formats/config_file.h"
#include "minivit/formats/safetensors.h"

extern char** environ;

namespace minivit_test {

static std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunResult run_minivit(const std::string& args) {
  return run_command(std::string(MINIVIT_EXE) + " " + args);
}

RunResult run_command(const std::string& command_line) {
  TempDir io("run");
  std::string cmd = command_line + " >" + io.str("out") + " 2>" + io.str("err") + " </dev/null";
  int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(io.path / "out");
  r.err = slurp(io.path / "err");
  return r;
}

pid_t spawn_minivit(const std::vector<std::string>& args, const std::string& stderr_path) {
  std::vector<std::string> all = {MINIVIT_EXE};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int err = posix_spawn(&pid, MINIVIT_EXE, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) throw std::runtime_error("cannot start " + std::string(MINIVIT_EXE));
  return pid;
}

static void put_be32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(char((v >> shift) & 0xFF));
}

minivit::Config printed_config(const std::string& script_output) {
  const size_t start = script_output.find("[model]");
  REQUIRE(start != std::string::npos);
  std::string toml = script_output.substr(start);
  toml.insert(std::string("[model]\n").size(), "patch_size = 4\ndim = 32\nheads = 2\n");
  return minivit::parse_config(toml, "printed keys");
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string read_text(const std::string& path) { return slurp(path); }

std::vector<float> tensor_values(const std::string& path) {
  minivit::SafetensorsFile f = minivit::read_safetensors(path);
  std::vector<float> all;
  for (const auto& name : f.order)
    all.insert(all.end(), f.tensors[name].data.begin(), f.tensors[name].data.end());
  return all;
}

void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile gz = gzopen(path.c_str(), "wb");
  REQUIRE(gz != nullptr);
  REQUIRE(gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size())) ==
          static_cast<int>(bytes.size()));
  REQUIRE(gzclose(gz) == Z_OK);
}

std::string read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const minivit::Error& e) {
    return e.what();
  }
  FAIL("expected a minivit::Error");
  return "";
}

void write_tiny_idx_dataset(const std::string& dir, int n_train, int n_test, int size,
                            int classes, uint64_t seed) {
  std::filesystem::create_directories(dir);
  auto write_split = [&](const std::string& prefix, int n, uint64_t split_seed) {
    std::string images, labels;
    put_be32(images, 0x803), put_be32(images, uint32_t(n)), put_be32(images, uint32_t(size)),
        put_be32(images, uint32_t(size));
    put_be32(labels, 0x801), put_be32(labels, uint32_t(n));
    for (int i = 0; i < n; ++i) {
      const int label = int(minivit::rng_u64(split_seed, uint64_t(i)) % uint64_t(classes));
      labels.push_back(char(label));
      const int cx = (label * 3) % (size - 2), cy = (label * 5 + 1) % (size - 2);
      for (int y = 0; y < size; ++y)
        for (int x = 0; x < size; ++x) {
          int v = int(minivit::rng_uniform(split_seed + 1, uint64_t(i * size * size + y * size + x)) * 80);
          if (x >= cx && x < cx + 3 && y >= cy && y < cy + 3) v += 170;
          images.push_back(char(v));
        }
    }
    write_text(dir + "/" + prefix + "-images-idx3-ubyte", images);
    write_text(dir + "/" + prefix + "-labels-idx1-ubyte", labels);
  };
  write_split("train", n_train, minivit::rng_key(seed, 1));
  write_split("t10k", n_test, minivit::rng_key(seed, 2));
}

std::string tiny_config_toml(const std::string& data_dir, const std::string& out_dir, int size,
                             int classes) {
  std::ostringstream s;
  s << "[model]\nimage_size = " << size << "\nchannels = 1\npatch_size = 4\ndim = 16\n"
    << "depth = 2\nheads = 2\nmlp_dim = 32\ndropout = 0.1\nattention_dropout = 0.1\n"
    << "num_classes = " << classes << "\n\n"
    << "[data]\nformat = \"idx\"\npath = \"" << data_dir << "\"\nmean = [0.3]\nstd = [0.3]\n"
    << "val_fraction = 0.2\n\n"
    << "[optim]\nname = \"adamw\"\nlr = 1e-2\nweight_decay = 0.01\nwarmup_steps = 5\n"
    << "clip_grad_norm = 1.0\nlabel_smoothing = 0.1\n\n"
    << "[train]\nepochs = 12\nbatch_size = 16\nseed = 3\nthreads = 2\nlog_every = 5\n"
    << "out_dir = \"" << out_dir << "\"\n";
  return s.str();
}

TinyTrainedRun::TinyTrainedRun(const std::string& tag, int size, const std::string& train_args)
    : dir(tag),
      data(dir.str("data")),
      config(dir.str("tiny.toml")),
      out(dir.str("run")),
      ckpt(out + "/last.safetensors") {
  write_tiny_idx_dataset(data, 320, 96, size, 4);
  write_text(config, tiny_config_toml(data, out, size, 4));
  train = run_minivit("train --config " + config + (train_args.empty() ? "" : " " + train_args));
}

}  // namespace minivit_test
