#pragma once
// The Vision Transformer (timm's VisionTransformer: global_pool='token' with a CLS token, or
// global_pool='avg' without one, as model.pool says), forward and backward by hand. Reading
// these headers is reading the model:
//   params.h                the weights: one flat buffer described by a table, timm's
//                           names and shapes, so checkpoints and optimizers are one loop
//   activations.h           the run state: buffers for one wave of activations, described
//                           by a table, sized once for the largest batch and reused
//   vit_forward/backward    the model, one layer call per line (vit_forward.cpp,
//                           vit_backward.cpp), compiled once per instruction-set level
//                           and run at the level of acts.compute (kernels/isa.h)
#include <cstdint>
#include <string>
#include <vector>

#include "minivit/core/config.h"
#include "minivit/core/tensor.h"
#include "minivit/kernels/isa.h"
#include "minivit/model/activations.h"
#include "minivit/model/params.h"

namespace minivit {

// Bytes a model needs, in double so that absurd sizes cannot overflow: its parameters
// (weights and gradients, and the optimizer's two moments for training) plus the
// Activations for `use` and a batch of `batch` images (activation_bytes).
double vit_memory_bytes(const ModelConfig& config, int batch, ActivationsFor use);

// Throws minivit::Error naming the model's sizes when vit_memory_bytes exceeds the
// machine's physical memory, before anything is allocated.
void check_vit_fits_memory(const ModelConfig& config, int batch, ActivationsFor use);

struct ViT {
  ModelConfig config;
  std::vector<ParamSpec> specs;
  int64_t num_params = 0;
  Tensor1 weights;  // (num_params)
  Tensor1 grads;    // (num_params)
  ViTParams w;      // views into weights
  ViTParams g;      // views into grads

  explicit ViT(const ModelConfig& config);
  ViT(const ViT&) = delete;
  ViT& operator=(const ViT&) = delete;

  // timm's initialisation, as the parameter table gives it (params.h).
  void init(uint64_t seed);
  void zero_grad();
  const ParamSpec* find(const std::string& name) const;
};

MINIVIT_ISA_BEGIN

// images (B, C, S, S), normalised. Leaves logits in acts.logits. `dropout_key` seeds the
// dropout masks of this step (ignored when !training); `first_sample` is the place of
// images[0] in the whole batch when the batch is split over processes, so that each image's
// masks are those a single process would draw for it. Throws minivit::Error unless `acts`
// was built for the model's shapes, 1 <= B <= acts.max_batch, and, when `training`, for
// training.
void vit_forward(const ViT& model, Activations& acts, const float* images, int B, bool training,
                 uint64_t dropout_key, int first_sample = 0);

// From acts.dlogits (B, K) back to every parameter; adds into model.grads. The backward of
// the last vit_forward on `acts`: after a training one with its dropout masks, after an
// evaluation one of the model without dropout (inspection asks that: why did the model,
// as it is used, choose this class). On activations built for ActivationsFor::explanation
// it also keeps each block's gradient at its attention weights in att_grad. Throws
// minivit::Error unless `acts` holds backward's buffers (Activations::has_backward) and its
// last vit_forward was of the same B.
void vit_backward(ViT& model, Activations& acts, int B);

// The forward weights (below), made from the model's weights.
void make_forward_weights(const ViT& model, Activations& acts);

MINIVIT_ISA_END

// Forward weights. vit_forward's products read the linear layers' weights transposed, (I, O),
// as they lie in acts (its *_w_t buffers): packing the (O, I) rows into columns instead
// costs each product again for every chunk of the batch, and for one image about a tenth of
// the forward. Under OpenBLAS's products, which take the weights as stored, none are made
// (Activations::reads_weight_transposes). A forward makes them from the model's weights once,
// unless they are held: hold_forward_weights makes them and marks them as the model's, and
// evaluation forwards of that model on `acts` read them as they are until
// release_forward_weights. Hold them only over weights that nothing changes meanwhile (a
// loaded model's predictions, one pass over a split): a forward would compute with the old
// ones. Training forwards make them anew whatever is held. hold_forward_weights throws
// minivit::Error unless `acts` was built for the model's shapes; make_forward_weights assumes
// it (vit_forward checks it first).
void hold_forward_weights(const ViT& model, Activations& acts);
void release_forward_weights(Activations& acts);

// Holds the forward weights for its own life: evaluate() holds them over its pass.
class ForwardWeightsHeld {
 public:
  ForwardWeightsHeld(const ViT& model, Activations& acts) : acts_(acts) {
    hold_forward_weights(model, acts);
  }
  ~ForwardWeightsHeld() { release_forward_weights(acts_); }
  ForwardWeightsHeld(const ForwardWeightsHeld&) = delete;
  ForwardWeightsHeld& operator=(const ForwardWeightsHeld&) = delete;

 private:
  Activations& acts_;
};

// Images a forward needs to keep every thread of the pool busy: it takes a batch through the
// model in chunks of a few images, one chunk per thread (vit_passes.h).
int vit_batch_filling_threads();

// Floating-point operations of one forward pass for one image (multiply-add = 2): the
// matrix products and attention, which are all but a sliver of the work.
double vit_forward_flops(const ModelConfig& config);

// Forward plus backward for one image: backward costs two products per forward product
// (input and weight gradients), less the input gradient of the patch projection, which is
// never needed. With patch dropout (model.patch_drop) the blocks run on the kept tokens.
double vit_train_flops(const ModelConfig& config);

// The attention core's share of the forward FLOPs (q k^T and P v against everything).
double vit_attention_flop_share(const ModelConfig& config);

}  // namespace minivit
