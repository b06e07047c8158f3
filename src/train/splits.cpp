#include "minivit/train/splits.h"

#include "minivit/core/error.h"
#include "minivit/data/data.h"

namespace minivit {

Split parse_split(const std::string& text, const std::string& what) {
  if (text == "test") return Split::test;
  if (text == "val") return Split::val;
  if (text == "train") return Split::train;
  throw Error(what + ": '" + text + "' is not one of test, val, train");
}

const char* split_name(Split split) {
  switch (split) {
    case Split::test: return "test";
    case Split::val: return "val";
    case Split::train: return "train";
  }
  return "?";
}

SplitImages images_of_split(const DataSplits& data, Split split, const Config& config) {
  if (split == Split::test) {
    std::vector<int64_t> all(static_cast<size_t>(data.test.size()));
    for (size_t i = 0; i < all.size(); ++i) all[i] = int64_t(i);
    return {data.test, std::move(all)};
  }
  TrainValSplit parts = split_train_val(data.train.size(), config.data.val_fraction, config.train.seed);
  return {data.train, split == Split::val ? std::move(parts.val) : std::move(parts.train)};
}

int64_t steps_per_epoch(int64_t train_images, int batch_size) {
  const int64_t steps = train_images / batch_size;
  if (steps == 0)
    throw Error("train.batch_size: " + std::to_string(batch_size) + " is larger than the " +
                std::to_string(train_images) + " training images");
  return steps;
}

}  // namespace minivit
