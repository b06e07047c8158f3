// From dataset to batches: the validation carve-out, epoch order, normalisation.
#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>
#include <set>

#include "minivit/core/error.h"
#include "minivit/data/data.h"

using namespace minivit;
using Catch::Matchers::Contains;

TEST_CASE("validation split: disjoint, complete, sized by the fraction, seeded", "[data]") {
  const TrainValSplit s = split_train_val(1000, 0.1f, 7);
  CHECK(s.val.size() == 100);
  CHECK(s.train.size() == 900);
  std::set<int64_t> all(s.train.begin(), s.train.end());
  for (int64_t i : s.val) CHECK(all.insert(i).second);
  CHECK(all.size() == 1000);
  CHECK(std::is_sorted(s.train.begin(), s.train.end()));
  // Not simply the tail of the file: a class-sorted dataset must not lose whole classes.
  CHECK(s.val.front() < 900);
  CHECK(split_train_val(1000, 0.1f, 7).val == s.val);
  CHECK(split_train_val(1000, 0.1f, 8).val != s.val);
  const TrainValSplit none = split_train_val(50, 0.0f, 7);
  CHECK(none.val.empty());
  std::vector<int64_t> in_order(50);
  std::iota(in_order.begin(), in_order.end(), 0);
  CHECK(none.train == in_order);
}

TEST_CASE("epoch order: a seeded permutation per epoch, identity without shuffle", "[data]") {
  std::vector<int64_t> idx(200);
  std::iota(idx.begin(), idx.end(), 0);
  const auto e0 = epoch_order(idx, true, 1, 0), e1 = epoch_order(idx, true, 1, 1);
  CHECK(e0 != idx);
  CHECK(e0 != e1);
  CHECK(epoch_order(idx, true, 1, 0) == e0);
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == idx);
  CHECK(epoch_order(idx, false, 1, 3) == idx);
}

TEST_CASE("fill_batch normalises per channel and gathers labels", "[data]") {
  Dataset d;
  d.images = xt::xtensor<uint8_t, 4>::from_shape({3, 2, 2, 2});
  for (size_t i = 0; i < d.images.size(); ++i) d.images.data()[i] = uint8_t(i * 10);
  d.labels = {4, 5, 6};
  d.num_classes = 7;
  const int64_t idx[2] = {2, 0};
  float images[2 * 8];
  int32_t labels[2];
  fill_batch(images, labels, d, idx, 2, {0.5f, 0.25f}, {0.5f, 0.25f});
  CHECK(labels[0] == 6);
  CHECK(labels[1] == 4);
  // image 2, channel 0, pixel 0 = 160; channel 1, pixel 0 = 200
  CHECK(images[0] == Approx((160 / 255.0 - 0.5) / 0.5));
  CHECK(images[4] == Approx((200 / 255.0 - 0.25) / 0.25));
  CHECK(images[8] == Approx((0 / 255.0 - 0.5) / 0.5));
}

TEST_CASE("data that does not fit the model is refused before training", "[data]") {
  Dataset d;
  d.images = xt::xtensor<uint8_t, 4>::from_shape({2, 1, 28, 28});
  d.labels = {0, 1};
  d.num_classes = 12;
  ModelConfig m;  // 28x28, 1 channel, 10 classes
  CHECK_THROWS_WITH(check_data_fits_model(d, m, "set"), Contains("model.num_classes = 10"));
  d.num_classes = 10;
  m.channels = 3;
  CHECK_THROWS_WITH(check_data_fits_model(d, m, "set"), Contains("1 channel"));
  m.channels = 1;
  m.image_size = 32;
  CHECK_THROWS_WITH(check_data_fits_model(d, m, "set"), Contains("28x28"));
  m.image_size = 28;
  CHECK_NOTHROW(check_data_fits_model(d, m, "set"));
}

TEST_CASE("load_data with format cifar10 on a missing path names the path", "[data]") {
  DataConfig c;
  c.format = DataFormat::cifar10;
  c.path = "/nonexistent/minivit/cifar-10-batches-bin";
  CHECK_THROWS_WITH(load_data(c, ModelConfig{}),
                    Contains("/nonexistent/minivit/cifar-10-batches-bin") &&
                        Contains("no such directory"));
}

TEST_CASE("class names are padded up to the model's classes", "[data]") {
  using Names = std::vector<std::string>;
  CHECK(class_names_for({"cat", "dog"}, 4) == Names{"cat", "dog", "class_2", "class_3"});
  CHECK(class_names_for({}, 2) == Names{"class_0", "class_1"});
  CHECK(class_names_for({"a", "b", "c"}, 3) == Names{"a", "b", "c"});
}
