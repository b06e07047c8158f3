// The backward that explains a prediction: after an evaluation forward, vit_backward is
// the gradient of the model as it is used (no dropout), here of one class's logit, checked
// against central differences with the attention gradients kept (which must not change the
// rest). The attention gradients themselves are checked against PyTorch's autograd in
// tests/reference (grad_rollout).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "model_gradcheck.h"
#include "minivit/model/vit.h"

using namespace minivit;
using namespace minivit_test;

namespace {

ModelConfig with_dropout(AttentionForm form, PoolKind pool) {
  ModelConfig c = tiny_model_config();
  c.dropout = 0.3f;
  c.attention_dropout = 0.3f;
  c.attention = form;
  c.pool = pool;
  return c;
}

// One class's logit after an evaluation forward of one image.
double class_logit(const ViT& model, Activations& acts, const float* image, int cls) {
  vit_forward(model, acts, image, 1, false, 0);
  return double(acts.logits[cls]);
}

void prepare(ViT& model) {
  model.init(7);
  fill_random(model.weights.data(), model.num_params, 0.3f, 8);
  for (const auto& s : model.specs)
    if (s.name.find("norm") != std::string::npos && s.name.find("weight") != std::string::npos)
      for (int64_t i = 0; i < s.size; ++i) model.weights.data()[s.offset + i] += 1.0f;
}

}  // namespace

TEST_CASE("after an evaluation forward, backward is the gradient of the model without dropout",
          "[model][grad][explain]") {
  for (AttentionForm form :
       {AttentionForm::scaled_dot, AttentionForm::cosine, AttentionForm::lsa}) {
    for (PoolKind pool : {PoolKind::cls, PoolKind::mean}) {
      const ModelConfig c = with_dropout(form, pool);
      INFO("attention " << int(form) << ", pool " << int(pool));
      ViT model(c);
      prepare(model);
      Activations acts(c, 1, ActivationsFor::explanation);
      const auto image = random_vector(c.channels * c.image_size * c.image_size, 1.0f, 9);
      const int cls = 2;
      vit_forward(model, acts, image.data(), 1, false, 0);
      std::fill_n(acts.dlogits, c.num_classes, 0.0f);
      acts.dlogits[cls] = 1.0f;
      model.zero_grad();
      vit_backward(model, acts, 1);
      const std::vector<float> grads(model.grads.begin(), model.grads.end());
      std::vector<GradTarget> targets;
      for (const auto& s : model.specs)
        if (s.trainable)
          targets.push_back({s.name, model.weights.data() + s.offset, grads.data() + s.offset, s.size});
      check_gradients([&] { return class_logit(model, acts, image.data(), cls); }, targets, 3e-3,
                      3e-2, 5e-4, 25);
    }
  }
}
