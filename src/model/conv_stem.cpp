#include "conv_stem.h"

#include "minivit/kernels/gemm.h"
#include "minivit/kernels/threads.h"
#include "minivit/nn/conv3x3.h"
#include "minivit/nn/gelu.h"
#include "minivit/nn/linear.h"
#include "minivit/nn/patch_drop.h"
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
// patch_drop_spread over a whole batch, its images cut across the pool.
void spread_kept_rows(float* full, const float* kept_rows, const uint8_t* keep, int B, int R,
                      int K, int O) {
  for_ranges(B, B >= 16, [&](int64_t b0, int64_t b1) {
    patch_drop_spread(full + b0 * R * O, kept_rows + b0 * K * O, keep + b0 * R, int(b1 - b0), R,
                      K, O);
  });
}

}  // namespace

void stem_forward_chunk(const ViT& model, Activations& acts, const float* images, int b0, int n,
                        bool keep_gelu_slope, const uint8_t* keep) {
  const ModelConfig& c = model.config;
  const int stages = c.stem_stages();
  auto at = [b0](auto* buffer, int64_t per_image) { return at_image(buffer, b0, per_image); };
  // With patch dropout a stage before the last computes only the positions that the kept
  // windows above it read (about half of them with three quarters dropped); the others stay
  // zero, feed nothing forward and take zero gradients.
  auto read_of = [&](int s) {
    return at(acts.stem[size_t(s)].read, int64_t(c.stem_side(s)) * c.stem_side(s));
  };
  if (keep)
    for (int s = stages - 2; s >= 0; --s)
      conv3x3_s2_windows_read(read_of(s), s + 2 == stages ? keep : read_of(s + 1), n,
                              c.stem_side(s));
  const float* inp = images;
  for (int s = 0; s < stages; ++s) {
    const StageShape shape(c, s);
    const StemActivations& a = acts.stem[size_t(s)];
    const StemParams& w = model.w.stem[size_t(s)];
    const bool last = s + 1 == stages;
    const LinearWeight weight{w.weight, acts.weight_columns(a.weight_t)};
    float* cols = at(a.cols, int64_t(shape.R) * shape.I);
    float* out = last ? at(acts.patches, int64_t(shape.R) * shape.O)
                      : at(a.out, int64_t(shape.R) * shape.O);
    // The positions left out (the last stage's dropped ones, and those of a stage before it
    // that no kept window reads) are not gathered. The last stage's are read by nothing but
    // the weight gradient's product, which minivit's fp32 kernels run without them: then
    // they are not even cleared (three quarters of the rows, 2% of a CIFAR-10 step).
    const uint8_t* positions = !keep ? nullptr : last ? keep : read_of(s);
    const bool clear_left_out = !last || !skips_unused_k(acts.products(false));
    conv3x3_s2_gather(cols, inp, n, c.stem_in(s), shape.side_in, s == 0, positions,
                      clear_left_out);
    if (last && keep) {
      // The convolution at the kept positions only.
      const int K = c.kept_patches();
      float* kept_cols = at(acts.kept_cols, int64_t(K) * shape.I);
      float* kept_pre = at(acts.kept_pre, int64_t(K) * shape.O);
      float* kept_out = at(acts.kept_patches, int64_t(K) * shape.O);
      patch_drop_forward(kept_cols, cols, keep, n, 0, shape.R, K, shape.I);
      linear_forward(kept_pre, kept_cols, weight, nullptr, n * K, shape.I, shape.O,
                     acts.products(false));
      bias_gelu_forward(kept_out, kept_pre, w.bias, int64_t(n) * K, shape.O, keep_gelu_slope);
      patch_drop_spread(out, kept_out, keep, n, shape.R, K, shape.O);
      return;
    }
    float* pre = at(a.pre, int64_t(shape.R) * shape.O);
    linear_forward(pre, cols, weight, nullptr, n * shape.R, shape.I, shape.O,
                   acts.products(false));
    bias_gelu_forward(out, pre, w.bias, int64_t(n) * shape.R, shape.O, keep_gelu_slope,
                      positions);
    inp = out;
  }
}

void stem_backward(ViT& model, Activations& acts, int B, bool kept_only) {
  const ModelConfig& c = model.config;
  for (int s = c.stem_stages() - 1; s >= 0; --s) {
    const StageShape shape(c, s);
    const StemActivations& a = acts.stem[size_t(s)];
    const int64_t rows = int64_t(B) * shape.R;
    const bool kept_rows = kept_only && s + 1 == c.stem_stages();
    // Rows the input gradient runs on: every position, or the kept ones (then in
    // dkept_pre, and spread into a.dpre with zero rows at the dropped positions).
    const int64_t input_rows = kept_rows ? int64_t(B) * c.kept_patches() : rows;
    const float* dpre = a.dpre;
    if (kept_rows) {
      gelu_backward_slope(acts.dkept_pre, acts.kept_pre, acts.dkept_patches,
                          input_rows * shape.O);
      spread_kept_rows(a.dpre, acts.dkept_pre, acts.patch_keep, B, shape.R, c.kept_patches(),
                       shape.O);
      dpre = acts.dkept_pre;
    } else {
      const float* dout = s + 1 < c.stem_stages() ? a.dout : acts.dpatches;
      if (acts.forward_was_training)  // a.pre holds GELU's slope (stem_forward_chunk)
        gelu_backward_slope(a.dpre, a.pre, dout, rows * shape.O);
      else
        gelu_backward(a.dpre, a.pre, dout, rows * shape.O, false);
    }
    // The weight gradient sums over every position, so that its sums are cut into blocks
    // and pieces as without patch dropout; the products skip a dropped one's zero rows.
    const float* weight = model.w.stem[size_t(s)].weight;
    StemParams& g = model.g.stem[size_t(s)];
    const uint8_t* positions = !kept_only ? nullptr : kept_rows ? acts.patch_keep : a.read;
    for (int piece = 0; piece < linear_param_pieces(shape.I, shape.O); ++piece)
      linear_backward_params(g.weight, g.bias, a.dpre, a.cols, int(rows), shape.I, shape.O,
                             piece, acts.products(false), positions);
    if (s == 0) break;  // the images take no gradient
    float* dcols = kept_rows ? acts.dkept_cols : a.dcols;
    linear_backward_input(dcols, dpre, weight, int(input_rows), shape.I, shape.O, false,
                          acts.products(false));
    float* dinp = acts.stem[size_t(s) - 1].dout;
    zero(dinp, int64_t(B) * shape.side_in * shape.side_in * c.stem_in(s));
    conv3x3_s2_scatter(dinp, dcols, B, c.stem_in(s), shape.side_in,
                       kept_rows ? acts.patch_keep : nullptr, c.kept_patches());
  }
}

MINIVIT_ISA_END
}  // namespace minivit
