// Augmentation on known images, the batch mixes, and the batch source with its prefetcher.
#include <omp.h>

#include <cmath>
#include <numeric>
#include <set>

#include <catch2/catch.hpp>

#include "minivit/core/config.h"
#include "minivit/data/augment.h"
#include "minivit/data/batcher.h"

using namespace minivit;

namespace {

constexpr int kH = 6, kW = 8;

// A 2-channel image whose pixel (c, y, x) is 100 c + 10 y + x, so every value says where it
// came from.
std::vector<uint8_t> coordinate_image() {
  std::vector<uint8_t> img(2 * kH * kW);
  for (int c = 0; c < 2; ++c)
    for (int y = 0; y < kH; ++y)
      for (int x = 0; x < kW; ++x) img[size_t((c * kH + y) * kW + x)] = uint8_t(100 * c + 10 * y + x);
  return img;
}

// Identity normalisation, except that padding (pixel 0) shows as 0.
const float kScale[2] = {1.0f, 1.0f};
const float kShift[2] = {0.0f, 0.0f};

float at(const std::vector<float>& img, int c, int y, int x) {
  return img[size_t((c * kH + y) * kW + x)];
}

}  // namespace

TEST_CASE("random crop shifts the image over zero padding", "[augment]") {
  std::vector<uint8_t> scratch(size_t(augment_scratch_bytes(2, kH, kW)));
  const std::vector<uint8_t> src = coordinate_image();
  std::vector<float> out(src.size());
  ImageAugment aug;
  aug.shift_x = 2, aug.shift_y = -1;
  augment_image(out.data(), src.data(), 2, kH, kW, kScale, kShift, aug, scratch.data());
  for (int c = 0; c < 2; ++c)
    for (int y = 0; y < kH; ++y)
      for (int x = 0; x < kW; ++x) {
        const int sy = y - 1, sx = x + 2;
        const bool inside = sy >= 0 && sx < kW;
        CHECK(at(out, c, y, x) == (inside ? float(100 * c + 10 * sy + sx) : 0.0f));
      }
}

TEST_CASE("horizontal flip mirrors every row, after the crop", "[augment]") {
  std::vector<uint8_t> scratch(size_t(augment_scratch_bytes(2, kH, kW)));
  const std::vector<uint8_t> src = coordinate_image();
  std::vector<float> out(src.size());
  ImageAugment aug;
  aug.flip = true;
  augment_image(out.data(), src.data(), 2, kH, kW, kScale, kShift, aug, scratch.data());
  for (int c = 0; c < 2; ++c)
    for (int y = 0; y < kH; ++y)
      for (int x = 0; x < kW; ++x) CHECK(at(out, c, y, x) == float(100 * c + 10 * y + (kW - 1 - x)));
  aug.shift_x = 1;  // flip of the crop: out(y, x) = src(y, W-1-x + 1)
  augment_image(out.data(), src.data(), 2, kH, kW, kScale, kShift, aug, scratch.data());
  CHECK(at(out, 0, 0, 0) == 0.0f);  // src x = 8 is padding
  CHECK(at(out, 0, 0, 1) == float(kW - 1));
}

TEST_CASE("random erasing overwrites exactly its rectangle with noise", "[augment]") {
  std::vector<uint8_t> scratch(size_t(augment_scratch_bytes(2, kH, kW)));
  const std::vector<uint8_t> src = coordinate_image();
  DataConfig config;
  config.erasing = 1.0f;
  std::vector<float> plain(src.size()), out(src.size());
  augment_image(plain.data(), src.data(), 2, kH, kW, kScale, kShift, ImageAugment{},
                scratch.data());
  int erased_images = 0;
  for (int slot = 0; slot < 50; ++slot) {
    const ImageAugment aug = draw_image_augment(config, kH, kW, 7, 3, slot);
    if (!aug.erase) continue;  // no rectangle fitted in ten tries: nothing erased
    ++erased_images;
    REQUIRE(aug.erase_x >= 0);
    REQUIRE(aug.erase_y >= 0);
    REQUIRE(aug.erase_x + aug.erase_w <= kW);
    REQUIRE(aug.erase_y + aug.erase_h <= kH);
    const float area = float(aug.erase_w * aug.erase_h) / (kH * kW);
    CHECK(area >= 0.02f * 0.5f);  // rounding of the sides on a tiny image
    CHECK(area <= 1.0f / 3.0f * 1.6f);
    augment_image(out.data(), src.data(), 2, kH, kW, kScale, kShift, aug, scratch.data());
    for (int c = 0; c < 2; ++c)
      for (int y = 0; y < kH; ++y)
        for (int x = 0; x < kW; ++x) {
          const bool in_box = x >= aug.erase_x && x < aug.erase_x + aug.erase_w &&
                              y >= aug.erase_y && y < aug.erase_y + aug.erase_h;
          if (!in_box) REQUIRE(at(out, c, y, x) == at(plain, c, y, x));
          if (in_box) REQUIRE(std::abs(at(out, c, y, x)) < 8.0f);  // N(0, 1) noise
        }
  }
  CHECK(erased_images > 40);
}

TEST_CASE("augmentation draws cover their ranges at the configured rates", "[augment]") {
  DataConfig config;
  config.crop_padding = 2;
  config.hflip = 0.3f;
  std::set<int> shifts_x, shifts_y;
  int flips = 0;
  const int n = 4000;
  for (int slot = 0; slot < n; ++slot) {
    const ImageAugment aug = draw_image_augment(config, 28, 28, 1, slot / 128, slot % 128);
    shifts_x.insert(aug.shift_x);
    shifts_y.insert(aug.shift_y);
    flips += aug.flip;
    CHECK_FALSE(aug.erase);
  }
  CHECK(shifts_x == std::set<int>{-2, -1, 0, 1, 2});
  CHECK(shifts_y == std::set<int>{-2, -1, 0, 1, 2});
  CHECK(std::abs(double(flips) / n - 0.3) < 0.03);

  SECTION("augment = false turns every augmentation off") {
    config.augment = false;
    config.erasing = 1.0f;
    config.mixup = 1.0f;
    const ImageAugment aug = draw_image_augment(config, 28, 28, 1, 0, 0);
    CHECK(aug.shift_x == 0);
    CHECK_FALSE(aug.flip);
    CHECK_FALSE(aug.erase);
    CHECK(draw_batch_mix(config, 28, 28, 1, 0).kind == BatchMix::kNone);
  }
}

TEST_CASE("Beta(alpha, alpha) draws have the right mean and variance", "[augment]") {
  for (float alpha : {0.2f, 1.0f, 4.0f}) {
    double sum = 0, sum_sq = 0;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
      const double v = rng_beta_symmetric(uint64_t(i) * 7919 + uint64_t(alpha * 100), alpha);
      REQUIRE(v >= 0.0);
      REQUIRE(v <= 1.0);
      sum += v, sum_sq += v * v;
    }
    const double mean = sum / n, var = sum_sq / n - mean * mean;
    INFO("alpha " << alpha);
    CHECK(std::abs(mean - 0.5) < 0.01);
    CHECK(std::abs(var - 1.0 / (4.0 * (2.0 * alpha + 1.0))) < 0.01);
  }
}

TEST_CASE("mixup blends each image with its mirror in the batch, targets summing to 1", "[augment]") {
  const int B = 3, C = 1, H = 2, W = 2, K = 3;
  std::vector<float> images = {1, 1, 1, 1, 5, 5, 5, 5, 9, 9, 9, 9};
  std::vector<float> targets = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  BatchMix mix;
  mix.kind = BatchMix::kMixup;
  mix.lambda = 0.75f;
  apply_batch_mix(images.data(), targets.data(), B, C, H, W, K, mix);
  for (int i = 0; i < 4; ++i) {
    CHECK(images[size_t(i)] == Approx(0.75 * 1 + 0.25 * 9));
    CHECK(images[size_t(4 + i)] == 5.0f);  // the middle image of an odd batch is its own pair
    CHECK(images[size_t(8 + i)] == Approx(0.75 * 9 + 0.25 * 1));
  }
  CHECK(targets == std::vector<float>{0.75f, 0, 0.25f, 0, 1, 0, 0.25f, 0, 0.75f});
  for (int b = 0; b < B; ++b)
    CHECK(targets[size_t(b * K)] + targets[size_t(b * K + 1)] + targets[size_t(b * K + 2)] ==
          Approx(1.0));
}

TEST_CASE("cutmix pastes the partner's box and weighs targets by its area", "[augment]") {
  DataConfig config;
  config.cutmix = 1.0f;
  const int H = 10, W = 10, B = 2, K = 2;
  int boxes = 0;
  for (int step = 0; step < 200; ++step) {
    const BatchMix mix = draw_batch_mix(config, H, W, 5, step);
    REQUIRE(mix.kind == BatchMix::kCutmix);
    std::vector<float> images(size_t(B * H * W));
    std::fill(images.begin(), images.begin() + H * W, 0.0f);
    std::fill(images.begin() + H * W, images.end(), 1.0f);
    std::vector<float> targets = {1, 0, 0, 1};
    apply_batch_mix(images.data(), targets.data(), B, 1, H, W, K, mix);
    // The share of image 0's pixels still its own is exactly its target weight.
    const float own = float(std::count(images.begin(), images.begin() + H * W, 0.0f)) / (H * W);
    CHECK(own == Approx(mix.lambda));
    CHECK(targets[0] == Approx(mix.lambda));
    CHECK(targets[1] == Approx(1 - mix.lambda));
    CHECK(targets[2] == Approx(1 - mix.lambda));
    CHECK(targets[3] == Approx(mix.lambda));
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        const bool in_box = x >= mix.box_x0 && x < mix.box_x1 && y >= mix.box_y0 && y < mix.box_y1;
        REQUIRE(images[size_t(y * W + x)] == (in_box ? 1.0f : 0.0f));
      }
    boxes += mix.lambda < 1.0f;
  }
  CHECK(boxes > 150);
}

TEST_CASE("mix_prob and the mixup/cutmix switch are honoured", "[augment]") {
  DataConfig config;
  config.mixup = 0.8f;
  config.cutmix = 1.0f;
  config.mix_prob = 0.5f;
  int none = 0, mixup = 0, cutmix = 0;
  for (int step = 0; step < 4000; ++step) {
    const BatchMix m = draw_batch_mix(config, 28, 28, 9, step);
    none += m.kind == BatchMix::kNone;
    mixup += m.kind == BatchMix::kMixup;
    cutmix += m.kind == BatchMix::kCutmix;
  }
  CHECK(std::abs(none / 4000.0 - 0.5) < 0.03);
  CHECK(std::abs(mixup / 4000.0 - 0.25) < 0.03);
  CHECK(std::abs(cutmix / 4000.0 - 0.25) < 0.03);
}

namespace {

Dataset counting_dataset(int n, int side, int classes) {
  Dataset d;
  d.images = xt::xtensor<uint8_t, 4>::from_shape({size_t(n), 1, size_t(side), size_t(side)});
  for (size_t i = 0; i < d.images.size(); ++i) d.images.data()[i] = uint8_t((i * 37) % 251);
  for (int i = 0; i < n; ++i) d.labels.push_back(i % classes);
  d.num_classes = classes;
  return d;
}

Config augmenting_config(int side, int classes) {
  Config c;
  c.model.image_size = side;
  c.model.num_classes = classes;
  c.train.batch_size = 8;
  c.train.seed = 11;
  c.data.crop_padding = 2;
  c.data.hflip = 0.5f;
  c.data.erasing = 0.5f;
  c.data.mixup = 0.4f;
  c.data.cutmix = 1.0f;
  c.optim.label_smoothing = 0.1f;
  return c;
}

}  // namespace

TEST_CASE("a batch is a function of (seed, step): prefetched, repeated or on any thread count",
          "[augment][batcher]") {
  const Dataset data = counting_dataset(100, 12, 5);
  const Config config = augmenting_config(12, 5);
  std::vector<int64_t> indices(90);
  std::iota(indices.begin(), indices.end(), 0);
  const int64_t steps_per_epoch = 90 / 8;
  TrainBatches direct(data, indices, config, steps_per_epoch);
  std::vector<Batch> expected;
  for (int64_t step = 0; step < 30; ++step) {
    expected.emplace_back(8, 144, 5);
    direct.make(step, expected.back());
    for (int b = 0; b < 8; ++b) {
      float sum = 0;
      for (int k = 0; k < 5; ++k) sum += expected.back().targets(size_t(b), size_t(k));
      REQUIRE(sum == Approx(1.0f));
    }
  }
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    TrainBatches source(data, indices, config, steps_per_epoch);
    BatchPrefetcher prefetcher(source);
    for (int64_t step = 0; step < 30; ++step) {
      const Batch& batch = prefetcher.get(step);
      REQUIRE(batch.images == expected[size_t(step)].images);
      REQUIRE(batch.targets == expected[size_t(step)].targets);
      REQUIRE(batch.labels == expected[size_t(step)].labels);
    }
    // A jump (as a resume makes) gives the same batch as getting there in order.
    const Batch& later = prefetcher.get(17);
    REQUIRE(later.images == expected[17].images);
  }
  omp_set_num_threads(2);

  SECTION("epochs are different permutations of the same images") {
    std::multiset<int32_t> first, second;
    for (int64_t s = 0; s < steps_per_epoch; ++s)
      for (int b = 0; b < 8; ++b) {
        first.insert(expected[size_t(s)].labels[size_t(b)]);
        second.insert(expected[size_t(s + steps_per_epoch)].labels[size_t(b)]);
      }
    CHECK(first.size() == size_t(8 * steps_per_epoch));
    CHECK(expected[0].labels != expected[size_t(steps_per_epoch)].labels);
  }
}

TEST_CASE("without augmentation a batch is the plain normalised images with smoothed targets",
          "[augment][batcher]") {
  const Dataset data = counting_dataset(40, 8, 4);
  Config config = augmenting_config(8, 4);
  config.data.augment = false;
  config.data.shuffle = false;
  config.data.mean = {0.5f};
  config.data.std = {0.25f};
  std::vector<int64_t> indices(40);
  std::iota(indices.begin(), indices.end(), 0);
  TrainBatches source(data, indices, config, 5);
  Batch batch(8, 64, 4);
  source.make(1, batch);  // images 8..15
  std::vector<float> plain(8 * 64);
  std::vector<int32_t> labels(8);
  std::vector<int64_t> chosen(indices.begin() + 8, indices.begin() + 16);
  fill_batch(plain.data(), labels.data(), data, chosen.data(), 8, config.data.mean, config.data.std);
  CHECK(std::equal(plain.begin(), plain.end(), batch.images.data()));
  CHECK(labels == batch.labels);
  CHECK(batch.targets(0, size_t(labels[0])) == Approx(0.9f + 0.1f / 4));
}

TEST_CASE("an error while preparing a batch reaches the training thread", "[augment][batcher]") {
  BatchPrefetcher prefetcher(
      [](int64_t step, Batch& batch) {
        if (step == 3) throw std::runtime_error("cannot read image 3");
        batch.labels[0] = int32_t(step);
      },
      2, 4, 2);
  CHECK(prefetcher.get(0).labels[0] == 0);
  CHECK(prefetcher.get(1).labels[0] == 1);
  CHECK(prefetcher.get(2).labels[0] == 2);  // step 3 is being prepared, and fails
  CHECK_THROWS_WITH(prefetcher.get(3), "cannot read image 3");
}
