#pragma once
// Why the model chose a class: class-specific gradient rollout, computed with the model's own
// backward. For class c with logit y_c, per layer l
//   W_l = mean over heads h of max(0, A_lh * dy_c/dA_lh)      (elementwise, (T, T))
// where A is the attention after the softmax (evaluation mode: no dropout); then, as in
// attention rollout, the identity is added for the residual path, rows renormalised to sum 1
// and the layers multiplied from the first to the last; the result is read where the head
// reads (the CLS row over the patches, the mean of all rows with model.pool = mean, or the
// rows weighted by the pooling weights with model.pool = seq).
// Weights that raised y_c and were large count; weights whose growth would lower y_c do not.
//
//   Explanation e = explain_class(model, image, -1);   // the predicted class
//   e.grad_rollout                                     // (G, G)
#include "minivit/core/tensor.h"
#include "minivit/inspect/attention_maps.h"
#include "minivit/model/vit.h"

namespace minivit {

struct Explanation {
  AttentionMaps maps;     // the evaluation forward's attention, logits and probabilities
  int class_index = 0;    // the class explained
  Tensor4 att_grad;       // (L, H, T, T) dy_c / dA
  Tensor2 grad_rollout;   // (G, G)
};

// Throws minivit::Error naming --class unless class_index is -1 or one of the K classes.
void check_class_index(int class_index, int num_classes);

// One evaluation forward of one normalised image (C, S, S) and one backward of logit
// `class_index` (-1: the predicted class). Uses model.grads as scratch (left zeroed).
// Throws minivit::Error when class_index is not -1 or a class of the model.
Explanation explain_class(ViT& model, const float* image, int class_index);

// The rollout above from the attention (L, H, T, T) and its gradient of the same shape.
Tensor2 gradient_rollout(const Tensor4& att, const Tensor4& att_grad, const Readout& readout);

}  // namespace minivit
