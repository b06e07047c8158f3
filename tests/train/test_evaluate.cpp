// evaluate() over a split: the same figures, bit for bit, whatever the activations it runs
// on and however many images a pass takes.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "minivit/core/rng.h"
#include "minivit/data/dataset.h"
#include "minivit/model/activations.h"
#include "minivit/model/vit.h"
#include "minivit/train/evaluate.h"
#include "tiny_config.h"

using namespace minivit;
using minivit_test::tiny_model_config;

namespace {

// 37 images of the tiny model's shape, pixels and labels from the seed.
Dataset random_split(const ModelConfig& c) {
  Dataset d;
  const size_t n = 37, C = size_t(c.channels), S = size_t(c.image_size);
  d.images = xt::xtensor<uint8_t, 4>::from_shape({n, C, S, S});
  for (size_t i = 0; i < d.images.size(); ++i) d.images.data()[i] = uint8_t(rng_u64(7, i));
  for (size_t i = 0; i < n; ++i) d.labels.push_back(int32_t(rng_u64(8, i) % c.num_classes));
  d.num_classes = c.num_classes;
  return d;
}

}  // namespace

TEST_CASE("evaluate gives the same figures on any activations and any pass size", "[eval]") {
  const ModelConfig c = tiny_model_config();
  ViT model(c);
  model.init(3);
  const Dataset data = random_split(c);
  std::vector<int64_t> indices(size_t(data.size()));
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = int64_t(i);
  const std::vector<float> mean(size_t(c.channels), 0.5f), std(size_t(c.channels), 0.25f);

  Activations whole(c, 64, ActivationsFor::evaluation);  // one pass of 37 images
  const EvalResult want = evaluate(model, whole, data, indices, mean, std);
  REQUIRE(want.n == 37);
  CHECK(want.loss > 0.0);
  // Passes of 5 (the last of 2), of 16 on the blocks' own buffers, of 7 as inspection builds.
  Activations fives(c, 5, ActivationsFor::evaluation);
  Activations training(c, 16, ActivationsFor::training);
  Activations inspection(c, 7, ActivationsFor::inspection);
  for (Activations* acts : {&fives, &training, &inspection}) {
    INFO("passes of " << acts->max_batch);
    const EvalResult got = evaluate(model, *acts, data, indices, mean, std);
    CHECK(got.n == want.n);
    CHECK(got.top1 == want.top1);
    CHECK(got.top5 == want.top5);
    CHECK(got.loss == want.loss);
    CHECK(got.confusion == want.confusion);
  }
}
