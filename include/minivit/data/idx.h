#pragma once
// MNIST-format IDX files (Fashion-MNIST, MNIST, and any IDX with ubyte images and labels),
// raw or gzip-compressed, read through zlib (gzread reads both transparently).
#include <string>

#include "minivit/data/dataset.h"

namespace minivit {

// Reads one images file (magic 0x00000803, dims N, H, W) and its labels file (magic
// 0x00000801, dim N). Checks magic numbers, that the header counts fit the file before
// allocating, that both counts agree, and that labels are < 256. num_classes is
// 1 + the largest label; class_names are "0".."K-1".
// Throws minivit::Error naming the file and what was expected.
Dataset load_idx_pair(const std::string& images_path, const std::string& labels_path);

// Loads the train and test splits from a directory holding
// train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz],
// t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz].
// Class names: Fashion-MNIST's ten names when the directory name contains "fashion",
// otherwise the digits. Both splits get the same num_classes (the larger).
DataSplits load_idx_dir(const std::string& dir);

}  // namespace minivit
