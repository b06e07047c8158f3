#pragma once
// One entry point per file reader, shared by the libFuzzer targets (fuzz_<name>.cpp) and the
// regression test (tests/test_fuzz_regressions.cpp), so both feed a file to the reader the
// same way. Each run_<name> returns when the reader accepts the input and lets the reader's
// minivit::Error through when it rejects it; anything else (a crash, a sanitizer report,
// another exception type, a hang, a large allocation) is a bug in the reader.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "minivit.h"
#include "minivit/core/error.h"
#include "minivit/data/cifar.h"
#include "minivit/data/idx.h"
#include "minivit/formats/checkpoint.h"
#include "minivit/formats/config_file.h"
#include "minivit/formats/safetensors.h"

namespace minivit_fuzz {

// A directory of this process's own for readers that take a path; removed at exit.
class ScratchDir {
 public:
  static const std::filesystem::path& path() {
    static ScratchDir dir;
    return dir.path_;
  }

 private:
  ScratchDir()
      : path_(std::filesystem::temp_directory_path() /
              ("minivit_fuzz_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::filesystem::path path_;
};

// Writes `bytes` to `name` (relative) in the scratch directory; returns the full path.
inline std::string write_scratch(const std::filesystem::path& name, std::string_view bytes) {
  std::string path = (ScratchDir::path() / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("fuzz harness: cannot write " + path);
  return path;
}

// A broken invariant that is not a reader rejecting its input: reported as a failure.
[[noreturn]] inline void invariant_broken(const std::string& what) {
  throw std::logic_error("fuzz invariant broken: " + what);
}

inline std::string be32(uint32_t v) {
  return {char(v >> 24), char((v >> 16) & 0xff), char((v >> 8) & 0xff), char(v & 0xff)};
}

// load_idx_pair reads two files. The first byte of the input picks which one the rest of
// the input is (even: the images file, odd: the labels file); the other is a fixed valid
// file of two 2x2 images or two labels, so the count check can pass.
inline void run_idx(std::string_view input) {
  if (input.empty()) return;
  static const std::string images_path =
      write_scratch("fixed-images-idx3-ubyte", be32(0x803) + be32(2) + be32(2) + be32(2) +
                                                   std::string("\x00\x40\x80\xff\x01\x02\x03\x04", 8));
  static const std::string labels_path =
      write_scratch("fixed-labels-idx1-ubyte", be32(0x801) + be32(2) + std::string("\x00\x01", 2));
  bool fuzz_labels = static_cast<uint8_t>(input[0]) & 1;
  std::string fuzzed = write_scratch(fuzz_labels ? "labels-idx1-ubyte" : "images-idx3-ubyte",
                                     input.substr(1));
  minivit::Dataset ds = fuzz_labels ? minivit::load_idx_pair(images_path, fuzzed)
                                    : minivit::load_idx_pair(fuzzed, labels_path);
  if (ds.images.shape(0) != ds.labels.size() ||
      ds.class_names.size() != static_cast<size_t>(ds.num_classes))
    invariant_broken("load_idx_pair returned inconsistent counts");
}

// parse_safetensors, then writing what was read and reading it again must give it back.
inline void run_safetensors(std::string_view input) {
  minivit::SafetensorsFile file =
      minivit::parse_safetensors(std::string(input), "fuzz.safetensors");
  std::vector<minivit::TensorRef> refs;
  for (const std::string& name : file.order) {
    const minivit::LoadedTensor& t = file.tensors.at(name);
    refs.push_back({name, t.shape, t.data.data()});
  }
  std::map<std::string, std::string> metadata = file.metadata;
  metadata.erase("minivit.checksum");  // the writer adds the one for the data it writes
  minivit::SafetensorsFile again = minivit::parse_safetensors(
      minivit::safetensors_bytes(refs, metadata), "fuzz-rewritten.safetensors");
  if (again.order != file.order) invariant_broken("tensor order changed in a round trip");
  for (const std::string& name : file.order) {
    const minivit::LoadedTensor &a = file.tensors.at(name), &b = again.tensors.at(name);
    if (a.shape != b.shape || a.data.size() != b.data.size() ||
        (!a.data.empty() &&
         std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) != 0))
      invariant_broken("tensor '" + name + "' changed in a round trip");
  }
}

// A minivit checkpoint: the safetensors layer, then the config, progress and class names
// from the metadata, then the model built from that config and filled from the tensors.
// The input is the JSON header, a NUL byte, then the data area; the 8-byte header size is
// put in front here, so that a longer metadata value does not also need a new size.
inline std::string checkpoint_file_of(std::string_view input) {
  size_t nul = input.find('\0');
  std::string_view header = input.substr(0, nul);
  std::string_view data = nul == std::string_view::npos ? "" : input.substr(nul + 1);
  uint64_t header_size = header.size();
  std::string file(reinterpret_cast<const char*>(&header_size), 8);
  file.append(header);
  file.append(data);
  return file;
}

inline void run_checkpoint(std::string_view input) {
  minivit::Checkpoint ckpt = minivit::checkpoint_from_safetensors(
      minivit::parse_safetensors(checkpoint_file_of(input), "fuzz.safetensors"),
      "fuzz.safetensors");
  if (!ckpt.model) invariant_broken("checkpoint accepted without a model");
}

// The same input through the C API's minivit_load_memory, as a program linking the library
// would hand it a buffer: a checkpoint it accepts must describe itself and predict an image;
// one it rejects must say so with MINIVIT_ERROR_LOAD and a message, never another status.
inline void run_api_load(std::string_view input) {
  const std::string file = checkpoint_file_of(input);
  struct Handle {
    minivit_model* model = minivit_create();
    ~Handle() { minivit_free(model); }
  } h;
  if (!h.model) invariant_broken("minivit_create returned NULL");
  const auto failed = [&](const char* call, minivit_status status) {
    invariant_broken(std::string(call) + ": status " + std::to_string(int(status)) + ": " +
                     minivit_last_error(h.model));
  };
  const minivit_status status = minivit_load_memory(h.model, file.data(), file.size());
  if (status == MINIVIT_ERROR_LOAD) {
    if (!*minivit_last_error(h.model)) invariant_broken("a rejected buffer without a message");
    throw minivit::Error(minivit_last_error(h.model));
  }
  if (status != MINIVIT_OK) failed("minivit_load_memory", status);
  minivit_description d;
  if (const minivit_status s = minivit_describe(h.model, &d); s != MINIVIT_OK)
    failed("minivit_describe", s);
  std::vector<float> image(size_t(d.channels) * size_t(d.image_size) * size_t(d.image_size));
  std::vector<float> probs(static_cast<size_t>(d.classes));
  if (const minivit_status s = minivit_predict(h.model, image.data(), 1, probs.data());
      s != MINIVIT_OK)
    failed("minivit_predict", s);
}

// The TOML text, then after each NUL byte one `--set` override. A config that loads must
// survive the trip through config_to_toml unchanged, as the run directory's config.toml
// relies on it.
inline void run_config(std::string_view input) {
  size_t nul = input.find('\0');
  std::string text(input.substr(0, nul));
  std::vector<std::string> overrides;
  while (nul != std::string_view::npos) {
    size_t next = input.find('\0', nul + 1);
    overrides.emplace_back(input.substr(nul + 1, next == std::string_view::npos
                                                     ? std::string_view::npos
                                                     : next - nul - 1));
    nul = next;
  }
  minivit::Config config = minivit::parse_config(text, "fuzz.toml", overrides);
  std::string resolved = minivit::config_to_toml(config);
  minivit::Config again;
  try {
    again = minivit::parse_config(resolved, "resolved.toml");
  } catch (const minivit::Error& e) {
    invariant_broken(std::string("the resolved config does not load again: ") + e.what());
  }
  if (minivit::config_to_toml(again) != resolved)
    invariant_broken("the resolved config changed when loaded again");
  // Strings compared as stored too: a lossy TOML form would read back as itself.
  auto strings = [](const minivit::Config& c) {
    std::vector<std::string> all = {c.data.path, c.train.out_dir};
    all.insert(all.end(), c.data.class_names.begin(), c.data.class_names.end());
    return all;
  };
  if (strings(again) != strings(config))
    invariant_broken("a string of the config changed in config_to_toml");
}

// The CIFAR readers take a directory. The first byte of the input picks the reader and the
// file: bit 0 CIFAR-10 (0) or CIFAR-100 (1), bit 1 CIFAR-100's fine (0) or coarse (1)
// labels, bit 2 whether the rest of the input is the test batch file (0) or the class
// names file (1). Every other batch file is a fixed valid one of one record.
inline void run_cifar(std::string_view input) {
  if (input.empty()) return;
  const uint8_t pick = static_cast<uint8_t>(input[0]);
  const bool cifar100 = pick & 1, coarse = pick & 2, names = pick & 4;
  const std::filesystem::path dir = ScratchDir::path() / (cifar100 ? "cifar100" : "cifar10");
  // One record: label byte(s) 0, then (3, 32, 32) pixels.
  const std::string record = std::string(cifar100 ? 2 : 1, '\0') + std::string(3 * 32 * 32, '\x80');
  std::filesystem::create_directories(dir);
  std::vector<std::string> train_files = {"train.bin"};
  if (!cifar100)
    train_files = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                   "data_batch_4.bin", "data_batch_5.bin"};
  for (const std::string& name : train_files)
    if (!std::filesystem::exists(dir / name)) write_scratch(dir.filename() / name, record);
  const std::string test_file = cifar100 ? "test.bin" : "test_batch.bin";
  const std::string names_file = !cifar100 ? "batches.meta.txt"
                                 : coarse  ? "coarse_label_names.txt"
                                           : "fine_label_names.txt";
  std::error_code ec;
  std::filesystem::remove(dir / names_file, ec);
  write_scratch(dir.filename() / test_file, names ? std::string_view(record) : input.substr(1));
  if (names) write_scratch(dir.filename() / names_file, input.substr(1));

  minivit::DataSplits splits =
      !cifar100 ? minivit::load_cifar10_dir(dir.string())
                : minivit::load_cifar100_dir(dir.string(), coarse ? minivit::Cifar100Label::coarse
                                                                  : minivit::Cifar100Label::fine);
  for (const minivit::Dataset* split : {&splits.train, &splits.test})
    if (split->images.shape(0) != split->labels.size() ||
        split->class_names.size() != static_cast<size_t>(split->num_classes))
      invariant_broken("a CIFAR split has inconsistent counts");
}

struct Target {
  const char* name;  // fuzz_<name>.cpp, fuzz/corpus/<name>/, fuzz/regressions/<name>/
  void (*run)(std::string_view input);
};

inline constexpr Target kTargets[] = {
    {"idx", run_idx},
    {"safetensors", run_safetensors},
    {"checkpoint", run_checkpoint},
    {"api_load", run_api_load},
    {"config", run_config},
    {"cifar", run_cifar},
};

// The body of every LLVMFuzzerTestOneInput: a rejected input is a normal outcome.
inline int fuzz_one(void (*run)(std::string_view), const uint8_t* data, size_t size) {
  try {
    run(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const minivit::Error&) {
  }
  return 0;
}

}  // namespace minivit_fuzz
