#pragma once
// CIFAR-10 and CIFAR-100, "binary version" (https://www.cs.toronto.edu/~kriz/cifar.html).
// A batch file is a bare sequence of fixed-size records: the label byte(s), then a 32x32
// colour image as three row-major planes, 1024 R, then 1024 G, then 1024 B bytes. That is
// already the (C, H, W) layout of Dataset, so images are copied as they are.
// Files may also be gzip-compressed (name.bin.gz); zlib reads both transparently.
#include <string>

#include "minivit/core/config.h"
#include "minivit/data/dataset.h"

namespace minivit {

// Loads CIFAR-10 from a directory holding data_batch_1.bin .. data_batch_5.bin (train,
// concatenated in that order) and test_batch.bin, each optionally .gz. The directory the
// tarball unpacks into, cifar-10-batches-bin/, may also be named by its parent.
// Images (N, 3, 32, 32); num_classes is 10. Class names come from batches.meta.txt when
// present (one per line, blank lines ignored), else airplane .. truck.
// Throws minivit::Error naming the file and what was expected: a missing directory or batch
// file, an empty file, a size that is not a whole number of records, a label out of range.
DataSplits load_cifar10_dir(const std::string& dir);

// Loads CIFAR-100 from a directory holding train.bin and test.bin (each optionally .gz), or
// its parent holding cifar-100-binary/. Records carry a coarse label byte, then a fine one;
// `label` picks which is used, so num_classes is 100 (fine) or 20 (coarse). Class names come
// from fine_label_names.txt / coarse_label_names.txt when present, else the standard names.
// Both label bytes are checked, whichever is used. Errors as for load_cifar10_dir.
DataSplits load_cifar100_dir(const std::string& dir, Cifar100Label label);

}  // namespace minivit
