#include "minivit/model/vit.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "minivit/core/error.h"
#include "vit_passes.h"  // kChunkImages
#include "minivit/kernels/threads.h"

// The model's description, its memory and its flops; the passes are vit_forward.cpp and
// vit_backward.cpp.
namespace minivit {

using namespace vit_passes;

// The shapes every layer relies on. The config reader checks them with file and line; a
// ModelConfig built in code meets them here.
static void check_model_shapes(const ModelConfig& c) {
  const int sizes[] = {c.image_size, c.channels, c.patch_size, c.dim,
                       c.depth,      c.heads,    c.mlp_dim,    c.num_classes};
  for (int size : sizes)
    if (size < 1)
      throw Error(
          "model: image_size, channels, patch_size, dim, depth, heads, mlp_dim and num_classes "
          "must all be at least 1");
  if (c.dim % c.heads != 0)
    throw Error("model: dim " + std::to_string(c.dim) + " is not divisible by heads " +
                std::to_string(c.heads));
  if (c.image_size % c.patch_size != 0)
    throw Error("model: image_size " + std::to_string(c.image_size) +
                " is not divisible by patch_size " + std::to_string(c.patch_size));
  if (c.pos_embed == PosEmbedKind::sincos2d && c.dim % 4 != 0)
    throw Error("model: dim " + std::to_string(c.dim) +
                " is not divisible by 4, as pos_embed sincos2d needs");
}

double vit_memory_bytes(const ModelConfig& c, int batch, ActivationsFor use) {
  const int copies = use == ActivationsFor::training ? 4 : 2;
  return 4.0 * vit_param_count(c) * copies + activation_bytes(c, batch, use);
}

void check_vit_fits_memory(const ModelConfig& c, int batch, ActivationsFor use) {
  const double needed = vit_memory_bytes(c, batch, use);
  const double available = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE));
  if (available > 0 && needed > available)
    throw Error("model: image_size " + std::to_string(c.image_size) + ", patch_size " +
                std::to_string(c.patch_size) + ", dim " + std::to_string(c.dim) + ", depth " +
                std::to_string(c.depth) + ", heads " + std::to_string(c.heads) + ", mlp_dim " +
                std::to_string(c.mlp_dim) + ", num_classes " + std::to_string(c.num_classes) +
                (batch > 0 ? " with batch " + std::to_string(batch) : std::string()) + " needs " +
                std::to_string(int64_t(needed / (1 << 30))) + " GiB, more than this machine's " +
                std::to_string(int64_t(available / (1 << 30))) + " GiB of memory");
}

ViT::ViT(const ModelConfig& c)
    : config(c),
      specs((check_model_shapes(c), check_vit_fits_memory(c, 0, ActivationsFor::evaluation),
             vit_param_specs(c))) {
  num_params = specs.back().offset + specs.back().size;
  weights = Tensor1::from_shape({size_t(num_params)});
  grads = Tensor1::from_shape({size_t(num_params)});
  weights.fill(0.0f);
  grads.fill(0.0f);
  w = bind_params(weights.data(), specs, c.depth);
  g = bind_params(grads.data(), specs, c.depth);
}

const ParamSpec* ViT::find(const std::string& name) const {
  for (const auto& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}

void ViT::zero_grad() { std::fill(grads.begin(), grads.end(), 0.0f); }

void ViT::init(uint64_t seed) { init_params(weights.data(), specs, seed); }

void hold_forward_weights(const ViT& model, Activations& acts) {
  if (!built_for(acts.config, model.config))
    throw Error("hold_forward_weights: the activations were built for another model");
  make_forward_weights(model, acts);
  acts.forward_weights_held = model.weights.data();
}

void release_forward_weights(Activations& acts) { acts.forward_weights_held = nullptr; }

int vit_batch_filling_threads() { return kChunkImages * num_threads(); }

// The forward flops per image of the conv stem's convolutions from stage first_stage on.
static double stem_flops(const ModelConfig& c, int first_stage) {
  double flops = 0.0;
  for (int s = first_stage; s < c.stem_stages(); ++s)
    flops += 2.0 * c.stem_side(s) * c.stem_side(s) * 9.0 * c.stem_in(s) * c.stem_out(s);
  return flops;
}

// The forward flops per image with the blocks on T tokens.
static double forward_flops(const ModelConfig& c, double T) {
  const double N = c.patches(), D = c.dim, M = c.mlp_dim, K = c.num_classes;
  const double per_block = 2 * T * D * 3 * D   // qkv
                           + 2 * 2 * T * T * D  // q k^T and P v over all heads
                           + 2 * T * D * D      // proj
                           + 2 * 2 * T * D * M; // fc1, fc2
  return stem_flops(c, 0) + 2 * N * c.patch_len() * D + c.depth * per_block + 2 * D * K;
}

double vit_forward_flops(const ModelConfig& c) { return forward_flops(c, c.tokens()); }

}  // namespace minivit

namespace minivit {

double vit_train_flops(const ModelConfig& c) {
  // The pixels take no gradient: the first layer's product with them is done twice in a
  // step (forward, weight gradient), not three times.
  const double patch_input_grad = c.stem_stages() > 0
                                      ? stem_flops(c, 0) - stem_flops(c, 1)
                                      : 2.0 * c.patches() * c.patch_len() * c.dim;
  // With patch dropout the blocks run on the kept tokens.
  double flops = 3 * forward_flops(c, c.train_tokens()) - patch_input_grad;
  // So does the projection, forward and in its weight gradient, and behind a conv stem the
  // last stage too, and both back to their inputs (vit_forward.cpp, conv_stem.cpp).
  if (c.patch_drop > 0.0f) {
    const double dropped = 1.0 - double(c.kept_patches()) / c.patches();
    const double projection = 2.0 * c.patches() * c.patch_len() * c.dim;
    if (c.stem_stages() > 0) {
      const int last = c.stem_stages() - 1;
      flops -= dropped * ((last > 0 ? 3 : 2) * stem_flops(c, last) + 3 * projection);
    } else {
      flops -= dropped * 2 * projection;
    }
  }
  return flops;
}

}  // namespace minivit

namespace minivit {

double vit_attention_flop_share(const ModelConfig& c) {
  const double T = c.tokens(), D = c.dim;
  return c.depth * 2 * 2 * T * T * D / vit_forward_flops(c);
}

}  // namespace minivit
