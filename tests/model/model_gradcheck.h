#pragma once
// The whole model against finite differences, shared by the tests of the default model and
// of its other forms (position embedding, pooling).
#include <catch2/catch.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "tiny_config.h"
#include "minivit/model/train_step.h"
#include "minivit/model/vit.h"
#include "minivit/nn/cross_entropy.h"

namespace minivit_test {

// tiny_model_config (tiny_config.h): small enough to difference every parameter, large
// enough that every path carries gradient.

// Every trainable parameter's gradient from vit_backward against central differences of the
// loss; parameters that are not trainable must come back with a zero gradient.
inline void check_model_gradients(const minivit::ModelConfig& c, double eps = 3e-3) {
  using namespace minivit;
  ViT model(c);
  // Larger weights than the init gives, so every path carries gradient well above noise.
  // Fixed tables keep the values they are initialised with.
  model.init(99);
  const std::vector<float> initialised(model.weights.begin(), model.weights.end());
  fill_random(model.weights.data(), model.num_params, 0.3f, 100);
  for (const auto& s : model.specs)
    if (!s.trainable)
      std::copy_n(initialised.data() + s.offset, s.size, model.weights.data() + s.offset);
  for (const auto& s : model.specs)
    if (s.name.find("norm") != std::string::npos && s.name.find("weight") != std::string::npos)
      for (int64_t i = 0; i < s.size; ++i) model.weights.data()[s.offset + i] += 1.0f;
  const int B = 3;
  Activations acts(c, B, ActivationsFor::training);
  auto images = random_vector(B * c.channels * c.image_size * c.image_size, 1.0f, 101);
  std::vector<float> targets(B * c.num_classes);
  const int32_t labels[B] = {0, 2, 1};
  make_targets(targets.data(), labels, B, c.num_classes, 0.1f);
  const uint64_t key = 555;  // fixed dropout masks, so the function is smooth in the weights
  forward_backward(model, acts, images.data(), targets.data(), B, key);
  std::vector<float> grads(model.grads.begin(), model.grads.end());
  auto f = [&] {
    vit_forward(model, acts, images.data(), B, true, key);
    return double(cross_entropy_forward(acts.probs, acts.logits, targets.data(), B,
                                        c.num_classes));
  };
  std::vector<GradTarget> targets_to_check;
  for (const auto& s : model.specs) {
    if (s.trainable) {
      targets_to_check.push_back({s.name, model.weights.data() + s.offset, grads.data() + s.offset, s.size});
      continue;
    }
    INFO(s.name << " is not trainable");
    for (int64_t i = 0; i < s.size; ++i) REQUIRE(grads[size_t(s.offset + i)] == 0.0f);
  }
  check_gradients(f, targets_to_check, eps, 3e-2, 5e-4, 40);
}

// A training-only draw (drop path, patch dropout): the model of config `with` evaluates, and
// back-propagates from an evaluation forward, exactly as the same weights under `without`,
// which lacks the draw; a training forward under `train_key` differs.
inline void check_evaluation_ignores_draw(const minivit::ModelConfig& with,
                                          const minivit::ModelConfig& without,
                                          uint64_t train_key) {
  using namespace minivit;
  ViT model(with), plain(without);
  model.init(6);
  std::copy(model.weights.begin(), model.weights.end(), plain.weights.begin());
  const int B = 4;
  Activations eval_with(with, B, ActivationsFor::evaluation);
  Activations eval_plain(without, B, ActivationsFor::evaluation);
  Activations train_with(with, B, ActivationsFor::training);
  Activations train_plain(without, B, ActivationsFor::training);
  const auto images = random_vector(B * with.channels * with.image_size * with.image_size, 1.0f, 7);
  const int64_t logits = int64_t(B) * with.num_classes;
  vit_forward(model, eval_with, images.data(), B, false, 1);
  vit_forward(plain, eval_plain, images.data(), B, false, 1);
  CHECK(std::equal(eval_with.logits, eval_with.logits + logits, eval_plain.logits));
  // In training the draws change the logits.
  vit_forward(model, train_with, images.data(), B, true, train_key);
  vit_forward(plain, train_plain, images.data(), B, true, train_key);
  CHECK_FALSE(std::equal(train_with.logits, train_with.logits + logits, train_plain.logits));
  // The backward of an evaluation forward is the model's without the draw.
  vit_forward(model, train_with, images.data(), B, false, 1);
  vit_forward(plain, train_plain, images.data(), B, false, 1);
  std::fill_n(train_with.dlogits, logits, 0.25f);
  std::fill_n(train_plain.dlogits, logits, 0.25f);
  model.zero_grad();
  plain.zero_grad();
  vit_backward(model, train_with, B);
  vit_backward(plain, train_plain, B);
  CHECK(std::equal(model.grads.begin(), model.grads.end(), plain.grads.begin()));
}

}  // namespace minivit_test
