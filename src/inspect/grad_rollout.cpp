#include "minivit/inspect/grad_rollout.h"

#include <algorithm>
#include <string>
#include <vector>

#include "minivit/core/error.h"
#include "minivit/model/predict.h"

namespace minivit {

void check_class_index(int class_index, int K) {
  if (class_index < -1 || class_index >= K)
    throw Error("--class " + std::to_string(class_index) + ": the model has " + std::to_string(K) +
                " classes (0 to " + std::to_string(K - 1) + ")");
}

Explanation explain_class(ViT& model, const float* image, int class_index) {
  const ModelConfig& c = model.config;
  const int K = c.num_classes;
  check_class_index(class_index, K);
  const size_t L = size_t(c.depth), H = size_t(c.heads), T = size_t(c.tokens());
  Activations acts(c, 1, ActivationsFor::explanation);
  vit_forward(model, acts, image, 1, false, 0);

  Explanation e;
  e.maps = attention_maps_of(c, acts);
  e.class_index = class_index >= 0 ? class_index
                                   : int(std::max_element(e.maps.logits.begin(), e.maps.logits.end()) -
                                         e.maps.logits.begin());

  std::fill_n(acts.dlogits, K, 0.0f);
  acts.dlogits[e.class_index] = 1.0f;
  model.zero_grad();
  vit_backward(model, acts, 1);
  model.zero_grad();
  e.att_grad = Tensor4::from_shape({L, H, T, T});
  for (size_t l = 0; l < L; ++l)
    std::copy_n(acts.blocks[l].att_grad, H * T * T, e.att_grad.data() + l * H * T * T);
  e.grad_rollout = gradient_rollout(e.maps.att, e.att_grad, e.maps.readout());
  return e;
}

Tensor2 gradient_rollout(const Tensor4& att, const Tensor4& att_grad, const Readout& readout) {
  const size_t L = att.shape(0), H = att.shape(1), T = att.shape(2), TT = T * T;
  if (att_grad.shape() != att.shape())
    throw Error("gradient rollout: the attention and its gradient differ in shape");
  std::vector<Tensor2> layers;
  for (size_t l = 0; l < L; ++l) {
    Tensor2 w = Tensor2::from_shape({T, T});
    const float* a = att.data() + l * H * TT;
    const float* g = att_grad.data() + l * H * TT;
    for (size_t i = 0; i < TT; ++i) {
      double sum = 0.0;
      for (size_t h = 0; h < H; ++h) sum += std::max(0.0, double(a[h * TT + i]) * g[h * TT + i]);
      w.data()[i] = float(sum / double(H));
    }
    layers.push_back(std::move(w));
  }
  return readout_rollout(rollout_chain(layers), readout);
}

}  // namespace minivit
