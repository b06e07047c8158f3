// The images eval, attention and train take for a split name: the test split whole, val
// and train carved from the training split as training carves them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "minivit/core/error.h"
#include "minivit/data/data.h"
#include "minivit/train/splits.h"

using namespace minivit;

namespace {

// Only the labels count for choosing indices; the images can stay empty.
DataSplits splits_of_size(int64_t n_train, int64_t n_test) {
  DataSplits data;
  data.train.labels.assign(size_t(n_train), 0);
  data.test.labels.assign(size_t(n_test), 0);
  return data;
}

Config carving(float val_fraction, uint64_t seed) {
  Config config;
  config.data.val_fraction = val_fraction;
  config.train.seed = seed;
  return config;
}

std::vector<int64_t> zero_to(int64_t n) {
  std::vector<int64_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), int64_t(0));
  return all;
}

}  // namespace

TEST_CASE("the test split is every test image in file order", "[splits]") {
  const DataSplits data = splits_of_size(50, 30);
  const SplitImages test = images_of_split(data, Split::test, carving(0.1f, 7));
  CHECK(&test.dataset == &data.test);
  CHECK(test.indices == zero_to(30));
}

TEST_CASE("val and train are training's carving: disjoint, sorted, together the whole "
          "training split",
          "[splits]") {
  const DataSplits data = splits_of_size(1000, 30);
  const Config config = carving(0.1f, 7);
  const SplitImages val = images_of_split(data, Split::val, config);
  const SplitImages train = images_of_split(data, Split::train, config);
  CHECK(&val.dataset == &data.train);
  CHECK(&train.dataset == &data.train);
  CHECK(val.indices.size() == 100);
  CHECK(train.indices.size() == 900);
  CHECK(std::is_sorted(val.indices.begin(), val.indices.end()));
  CHECK(std::is_sorted(train.indices.begin(), train.indices.end()));
  std::vector<int64_t> both;
  std::set_intersection(val.indices.begin(), val.indices.end(), train.indices.begin(),
                        train.indices.end(), std::back_inserter(both));
  CHECK(both.empty());
  both.clear();
  std::merge(val.indices.begin(), val.indices.end(), train.indices.begin(), train.indices.end(),
             std::back_inserter(both));
  CHECK(both == zero_to(1000));

  const TrainValSplit carved = split_train_val(1000, 0.1f, 7);
  CHECK(val.indices == carved.val);
  CHECK(train.indices == carved.train);
  CHECK(images_of_split(data, Split::val, carving(0.1f, 8)).indices != val.indices);
}

TEST_CASE("without a validation fraction val is empty and train is everything", "[splits]") {
  const DataSplits data = splits_of_size(40, 10);
  CHECK(images_of_split(data, Split::val, carving(0.0f, 7)).indices.empty());
  CHECK(images_of_split(data, Split::train, carving(0.0f, 7)).indices == zero_to(40));
}

TEST_CASE("split names read back as written; anything else is refused", "[splits]") {
  for (const Split split : {Split::test, Split::val, Split::train})
    CHECK(parse_split(split_name(split), "--split") == split);
  CHECK(std::string(split_name(Split::val)) == "val");
  CHECK_THROWS_AS(parse_split("validation", "--split"), Error);
  CHECK_THROWS_WITH(parse_split("validation", "--split"),
                    "--split: 'validation' is not one of test, val, train");
  CHECK_THROWS_WITH(parse_split("Test", "--split"), "--split: 'Test' is not one of test, val, train");
  CHECK_THROWS_WITH(parse_split("", "--split"), "--split: '' is not one of test, val, train");
}
