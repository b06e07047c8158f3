#pragma once
// The images a command works on, by split name. "test" is the whole test split; "val" and
// "train" are carved from the training split exactly as training carved them
// (split_train_val with the run's data.val_fraction and train.seed), so eval and attention
// see the very images a run validated and trained on.
#include <cstdint>
#include <string>
#include <vector>

#include "minivit/core/config.h"
#include "minivit/data/dataset.h"

namespace minivit {

enum class Split { test, val, train };

// Reads "test", "val" or "train"; anything else throws minivit::Error
// "<what>: '<text>' is not one of test, val, train".
Split parse_split(const std::string& text, const std::string& what);
const char* split_name(Split split);

struct SplitImages {
  const Dataset& dataset;        // data.test for the test split, data.train otherwise
  std::vector<int64_t> indices;  // into `dataset`, sorted; empty for val when val_fraction = 0
};

SplitImages images_of_split(const DataSplits& data, Split split, const Config& config);

// The whole batches of `batch_size` in one epoch of `train_images` (the rest of an epoch is
// dropped); throws minivit::Error naming train.batch_size when not even one fits.
int64_t steps_per_epoch(int64_t train_images, int batch_size);

}  // namespace minivit
