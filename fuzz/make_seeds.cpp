// Writes the seed inputs in fuzz/corpus/<target>/: small valid files made with minivit's own
// writers, so every seed is accepted by its reader (tests/test_fuzz_regressions.cpp checks
// that). Run by hand after a file format changes: build-fuzz/make_seeds fuzz/corpus
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "fuzz_entry.h"
#include "minivit/core/fileio.h"
#include "minivit/formats/checkpoint.h"
#include "minivit/formats/config_file.h"
#include "minivit/formats/safetensors.h"
#include "minivit/model/vit.h"

namespace fs = std::filesystem;

namespace {

void put(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
  std::cout << path.string() << " (" << bytes.size() << " bytes)\n";
}

std::string gzip(const std::string& bytes) {
  z_stream z{};
  // 15 window bits + 16: a gzip wrapper, as `gzip` writes.
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2 failed");
  std::string out(deflateBound(&z, bytes.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate failed");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void idx_seeds(const fs::path& dir) {
  using minivit_fuzz::be32;
  // Two images, to match the fixed labels file run_idx pairs them with, and vice versa.
  std::string images = be32(0x803) + be32(2) + be32(3) + be32(2);
  for (int i = 0; i < 12; ++i) images.push_back(static_cast<char>(i * 21));
  std::string labels = be32(0x801) + be32(2) + std::string("\x03\x00", 2);
  put(dir / "images_raw", '\0' + images);
  put(dir / "images_gzip", '\0' + gzip(images));
  put(dir / "labels_raw", '\1' + labels);
  put(dir / "labels_gzip", '\1' + gzip(labels));
}

std::string bytes_of(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

void safetensors_seeds(const fs::path& dir) {
  std::vector<float> a = {1, -2, 3.5f, 0, 1e-3f, -0.0f}, b = {7, 8}, s = {42};
  put(dir / "minivit_f32",
      minivit::safetensors_bytes({{"w.a", {2, 3}, a.data()},
                                  {"w.b", {2}, b.data()},
                                  {"scalar", {}, s.data()},
                                  {"empty", {0, 3}, nullptr}},
                                 {{"minivit.step", "3"}, {"note", "seed"}}));
  // The other dtypes a reader converts, as another writer lays them out: no checksum,
  // header padded with spaces to 8 bytes.
  std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
      R"("bf":{"dtype":"BF16","shape":[1,2],"data_offsets":[4,8]},)"
      R"("d":{"dtype":"F64","shape":[1],"data_offsets":[8,16]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string data = std::string("\x00\x3c\x01\x80", 4)     // F16 1.0, -subnormal
                     + std::string("\x80\x3f\x00\xc0", 4)   // BF16 1.0, -2.0
                     + std::string("\x00\x00\x00\x00\x00\x00\xf0\x3f", 8);  // F64 1.0
  uint64_t n = header.size();
  put(dir / "other_dtypes", std::string(reinterpret_cast<const char*>(&n), 8) + header + data);
}

void checkpoint_seeds(const fs::path& dir) {
  minivit::Config config;
  config.model.image_size = 4;
  config.model.patch_size = 2;
  config.model.channels = 1;
  config.model.dim = 4;
  config.model.depth = 1;
  config.model.heads = 2;
  config.model.mlp_dim = 4;
  config.model.num_classes = 2;
  config.data.class_names = {"no", "yes"};
  minivit::validate_config(config);
  minivit::ViT model(config.model);
  model.init(1);
  minivit::TrainingProgress progress;
  progress.step = 5;
  progress.epoch = 1;
  progress.val_top1 = 0.5;
  fs::path tmp = fs::temp_directory_path() / "minivit_make_seeds.safetensors";
  minivit::save_checkpoint(tmp.string(), model, config, config.data.class_names, progress);
  // In run_checkpoint's form: the header, a NUL byte, the data (no 8-byte size).
  std::string file = minivit::read_file(tmp.string());
  uint64_t header_size;
  std::memcpy(&header_size, file.data(), 8);
  put(dir / "tiny_model", file.substr(8, header_size) + '\0' + file.substr(8 + header_size));
  fs::remove(tmp);
}

void config_seeds(const fs::path& dir) {
  put(dir / "fashion_mnist.toml",
      minivit::read_file(std::string(MINIVIT_SOURCE_DIR) + "/configs/fashion_mnist.toml"));
  put(dir / "empty.toml", "");
  put(dir / "tiny.toml",
      "[model]\nimage_size = 8\npatch_size = 4\ndim = 8\ndepth = 1\nheads = 2\nmlp_dim = 8\n"
      "num_classes = 3\n\n[data]\npath = \"data/tiny\"\nmean = [0.5]\nstd = [0.25]\n"
      "class_names = [\"a\", \"b\", \"c\"]\naugment = false\n\n[optim]\nname = \"sgd\"\n"
      "lr = 0.1\nschedule = \"constant\"\n\n[train]\nepochs = 1\nbatch_size = 4\n");
  put(dir / "augment.toml",
      "[model]\nchannels = 3\nimage_size = 32\n\n[data]\nformat = \"cifar10\"\n"
      "mean = [0.49, 0.48, 0.45]\nstd = [0.25, 0.24, 0.26]\ncrop_padding = 4\nhflip = 0.5\n"
      "erasing = 0.25\nmixup = 0.8\ncutmix = 1.0\nmix_prob = 0.5\n");
  // Overrides follow the text, each after a NUL byte (see run_config).
  const std::string nul(1, '\0');
  put(dir / "with_overrides.toml", "[model]\ndim = 32\n" + nul + "model.heads=2" + nul +
                                       "data.path=/tmp/some data" + nul +
                                       "train.out_dir = \"runs/x\"" + nul + "optim.lr=3e-4");
}

void cifar_seeds(const fs::path& dir) {
  // run_cifar's first byte: bit 0 CIFAR-100, bit 1 coarse labels, bit 2 a names file.
  auto records = [](int count, int label_bytes, int classes) {
    std::string out;
    for (int r = 0; r < count; ++r) {
      for (int b = 0; b < label_bytes; ++b) out.push_back(static_cast<char>((r * 7 + b) % classes));
      for (int i = 0; i < 3 * 32 * 32; ++i) out.push_back(static_cast<char>((i * 13 + r) & 0xff));
    }
    return out;
  };
  put(dir / "cifar10_test_raw", '\0' + records(2, 1, 10));
  put(dir / "cifar10_test_gzip", '\0' + gzip(records(3, 1, 10)));
  put(dir / "cifar100_fine_test_raw", '\1' + records(1, 2, 20));
  put(dir / "cifar100_coarse_test_gzip", '\3' + gzip(records(3, 2, 20)));
  std::string ten;
  for (const char* name : {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog",
                           "horse", "ship", "truck"})
    ten += std::string(name) + "\n";
  put(dir / "cifar10_names", '\4' + ten + "\n");
  std::string twenty;
  for (int k = 0; k < 20; ++k) twenty += "  superclass " + std::to_string(k) + "\r\n";
  put(dir / "cifar100_coarse_names", '\7' + twenty);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seeds CORPUS_DIR (fuzz/corpus)\n";
    return 2;
  }
  fs::path corpus = argv[1];
  try {
    idx_seeds(corpus / "idx");
    safetensors_seeds(corpus / "safetensors");
    checkpoint_seeds(corpus / "checkpoint");
    config_seeds(corpus / "config");
    cifar_seeds(corpus / "cifar");
  } catch (const std::exception& e) {
    std::cerr << "make_seeds: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
