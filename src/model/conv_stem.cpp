#include "conv_stem.h"

#include "minivit/nn/conv3x3.h"
#include "minivit/nn/gelu.h"
#include "minivit/nn/linear.h"
#include "vit_passes.h"

namespace minivit {
MINIVIT_ISA_BEGIN

using namespace vit_passes;

namespace {
// Stage s's sizes: positions an image (R), inputs a position (I), channels out (O).
struct StageShape {
  int side_in, R, I, O;
  StageShape(const ModelConfig& c, int s)
      : side_in(s == 0 ? c.image_size : c.stem_side(s - 1)),
        R(c.stem_side(s) * c.stem_side(s)),
        I(9 * c.stem_in(s)),
        O(c.stem_out(s)) {}
};
}  // namespace

void stem_forward_chunk(const ViT& model, Activations& acts, const float* images, int b0, int n,
                        bool keep_gelu_slope) {
  const ModelConfig& c = model.config;
  const int stages = c.stem_stages();
  auto at = [b0](auto* buffer, int64_t per_image) { return at_image(buffer, b0, per_image); };
  const float* inp = images;
  for (int s = 0; s < stages; ++s) {
    const StageShape shape(c, s);
    const StemActivations& a = acts.stem[size_t(s)];
    const StemParams& w = model.w.stem[size_t(s)];
    float* cols = at(a.cols, int64_t(shape.R) * shape.I);
    float* pre = at(a.pre, int64_t(shape.R) * shape.O);
    float* out = s + 1 < stages ? at(a.out, int64_t(shape.R) * shape.O)
                                : at(acts.patches, int64_t(shape.R) * shape.O);
    conv3x3_s2_gather(cols, inp, n, c.stem_in(s), shape.side_in, s == 0);
    linear_forward(pre, cols, w.weight, nullptr, n * shape.R, shape.I, shape.O,
                   acts.products(false));
    bias_gelu_forward(out, pre, w.bias, int64_t(n) * shape.R, shape.O, keep_gelu_slope);
    inp = out;
  }
}

void stem_backward(ViT& model, Activations& acts, int B) {
  const ModelConfig& c = model.config;
  for (int s = c.stem_stages() - 1; s >= 0; --s) {
    const StageShape shape(c, s);
    const StemActivations& a = acts.stem[size_t(s)];
    const int64_t rows = int64_t(B) * shape.R;
    const float* dout = s + 1 < c.stem_stages() ? a.dout : acts.dpatches;
    if (acts.forward_was_training)  // a.pre holds GELU's slope (stem_forward_chunk)
      gelu_backward_slope(a.dpre, a.pre, dout, rows * shape.O);
    else
      gelu_backward(a.dpre, a.pre, dout, rows * shape.O, false);
    const float* weight = model.w.stem[size_t(s)].weight;
    StemParams& g = model.g.stem[size_t(s)];
    for (int piece = 0; piece < linear_param_pieces(shape.I, shape.O); ++piece)
      linear_backward_params(g.weight, g.bias, a.dpre, a.cols, int(rows), shape.I, shape.O,
                             acts.ones, piece, acts.products(false));
    if (s == 0) break;  // the images take no gradient
    linear_backward_input(a.dcols, a.dpre, weight, int(rows), shape.I, shape.O, false,
                          acts.products(false));
    float* dinp = acts.stem[size_t(s) - 1].dout;
    zero(dinp, int64_t(B) * shape.side_in * shape.side_in * c.stem_in(s));
    conv3x3_s2_scatter(dinp, a.dcols, B, c.stem_in(s), shape.side_in);
  }
}

MINIVIT_ISA_END
}  // namespace minivit
