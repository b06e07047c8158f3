// What position embeddings are for, on real images: without them (model.pos_embed = "none")
// a ViT sees a set of patches, so shuffling the patches of a Fashion-MNIST image leaves its
// prediction unchanged; with a position table (learned or sincos2d) it does not.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "gradcheck.h"
#include "minivit/data/data.h"
#include "minivit/model/vit.h"

using namespace minivit;
using namespace minivit_test;

namespace {

// The first `count` Fashion-MNIST test images, normalised as training normalises them.
std::vector<float> test_images(int count) {
  const DataConfig data;  // the default: Fashion-MNIST from the Debian package
  const DataSplits splits = load_data(data, ModelConfig{});
  REQUIRE(splits.test.size() >= count);
  std::vector<float> images(size_t(count) * 28 * 28);
  for (size_t i = 0; i < images.size(); ++i)
    images[i] = (splits.test.images.data()[i] / 255.0f - data.mean[0]) / data.std[0];
  return images;
}

// The same images with their 4x4 patches moved by one fixed permutation of the 7x7 grid.
std::vector<float> shuffle_patches(const std::vector<float>& images, int count) {
  const int S = 28, P = 4, G = S / P;
  std::vector<int> order(G * G);
  std::iota(order.begin(), order.end(), 0);
  for (int i = G * G - 1; i > 0; --i) std::swap(order[i], order[(i * 17 + 5) % (i + 1)]);
  std::vector<float> out(images.size());
  for (int n = 0; n < count; ++n)
    for (int to = 0; to < G * G; ++to) {
      const int from = order[to];
      for (int y = 0; y < P; ++y)
        for (int x = 0; x < P; ++x)
          out[size_t(n) * S * S + (to / G * P + y) * S + to % G * P + x] =
              images[size_t(n) * S * S + (from / G * P + y) * S + from % G * P + x];
    }
  return out;
}

// Largest change of a logit, and how many predictions change, when the patches move.
struct Change {
  double largest = 0;
  int predictions = 0;
};

Change change_under_shuffle(PosEmbedKind pos_embed, const std::vector<float>& images,
                            const std::vector<float>& shuffled, int count) {
  ModelConfig c;  // the default model: 28x28 grey, 4x4 patches, CLS pooling
  c.pos_embed = pos_embed;
  ViT model(c);
  model.init(1);
  // Weights larger than the initialisation's, so attention is far from uniform; a learned
  // position table as large as the patch embeddings, as training makes it; the sincos2d
  // table as it is built.
  const std::vector<float> initialised(model.weights.begin(), model.weights.end());
  fill_random(model.weights.data(), model.num_params, 0.1f, 7);
  if (const ParamSpec* pos = model.find("pos_embed")) {
    if (pos_embed == PosEmbedKind::learned)
      fill_random(model.weights.data() + pos->offset, pos->size, 0.5f, 8);
    else
      std::copy_n(initialised.data() + pos->offset, pos->size, model.weights.data() + pos->offset);
  }
  Activations acts(c, count, ActivationsFor::evaluation);
  vit_forward(model, acts, images.data(), count, false, 0);
  const std::vector<float> before(acts.logits, acts.logits + count * c.num_classes);
  vit_forward(model, acts, shuffled.data(), count, false, 0);
  Change change;
  for (int n = 0; n < count; ++n) {
    const float* a = before.data() + n * c.num_classes;
    const float* b = acts.logits + n * c.num_classes;
    for (int k = 0; k < c.num_classes; ++k) change.largest = std::max(change.largest, double(std::abs(a[k] - b[k])));
    change.predictions += std::max_element(a, a + c.num_classes) - a !=
                          std::max_element(b, b + c.num_classes) - b;
  }
  return change;
}

}  // namespace

TEST_CASE("without position embeddings, shuffling a real image's patches changes nothing",
          "[model][forms][data]") {
  const int count = 32;
  const std::vector<float> images = test_images(count);
  const std::vector<float> shuffled = shuffle_patches(images, count);
  REQUIRE(shuffled != images);
  const Change none = change_under_shuffle(PosEmbedKind::none, images, shuffled, count);
  const Change learned = change_under_shuffle(PosEmbedKind::learned, images, shuffled, count);
  const Change sincos = change_under_shuffle(PosEmbedKind::sincos2d, images, shuffled, count);
  INFO("largest logit change: none " << none.largest << ", learned " << learned.largest
                                     << ", sincos2d " << sincos.largest);
  // Without positions only float rounding moves (sums taken in another order); with them the
  // logits move by orders of magnitude more (1e-3 here: random weights spread the CLS
  // token's attention over many patches, which averages much of the change away).
  CHECK(none.largest < 1e-5);
  CHECK(none.predictions == 0);
  CHECK(learned.largest > 1e-4);
  CHECK(sincos.largest > 1e-4);
}
