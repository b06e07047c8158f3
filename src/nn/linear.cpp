#include "minivit/nn/linear.h"

#include <cstdint>
#include <cstddef>
#include <algorithm>

#include "minivit/kernels/gemm.h"

namespace minivit {
MINIVIT_ISA_BEGIN

// out (R, O) = inp (R, I) . W^T, from W^T where the caller keeps it and the kernels read it
// (read in place), else from W (packed by the kernels).
static void forward_product(float* out, const float* inp, LinearWeight weight, int R, int I,
                            int O, Products products, const GemmEpilogue& epilogue) {
  if (weight.columns && reads_weight_columns(products.kernels))
    gemm(false, false, R, O, I, 1.0f, inp, I, weight.columns, O, 0.0f, out, O, products,
         epilogue);
  else
    gemm(false, true, R, O, I, 1.0f, inp, I, weight.rows, I, 0.0f, out, O, products, epilogue);
}

void linear_forward(float* out, const float* inp, LinearWeight weight, const float* bias, int R,
                    int I, int O, Products products) {
  forward_product(out, inp, weight, R, I, O, products, GemmEpilogue{bias, nullptr, 0});
}

void linear_residual_forward(float* out, const float* inp, LinearWeight weight,
                             const float* bias, const float* residual, int R, int I, int O,
                             Products products) {
  forward_product(out, inp, weight, R, I, O, products, GemmEpilogue{bias, residual, O});
}

void linear_gelu_forward(float* pre, float* gelu_out, const float* inp, LinearWeight weight,
                         const float* bias, int R, int I, int O, Products products,
                         bool slope_in_pre) {
  GemmEpilogue epilogue{bias, nullptr, 0};
  epilogue.gelu = gelu_out;
  epilogue.ld_gelu = O;
  epilogue.gelu_slope = slope_in_pre;
  forward_product(pre, inp, weight, R, I, O, products, epilogue);
}

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int R, int I, int O,
                     Products products) {
  // forward: out = inp . W^T + b
  if (dinp) linear_backward_input(dinp, dout, weight, R, I, O, true, products);
  for (int piece = 0; piece < linear_param_pieces(I, O); ++piece)
    linear_backward_params(dweight, dbias, dout, inp, R, I, O, piece, products);
}

void linear_backward_input(float* dinp, const float* dout, const float* weight, int R, int I,
                           int O, bool add_into, Products products) {
  // dinp (+)= dout . W
  gemm(false, false, R, I, O, 1.0f, dout, O, weight, I, add_into ? 1.0f : 0.0f, dinp, I,
       products);
}

void linear_backward_input_gelu(float* dpre, const float* dout, const float* weight,
                                const float* slope, int R, int I, int O, Products products) {
  GemmEpilogue epilogue;
  epilogue.scale = slope;
  epilogue.ld_scale = I;
  gemm(false, false, R, I, O, 1.0f, dout, O, weight, I, 0.0f, dpre, I, products, epilogue);
}

// 64: the product kernels' panel width, so a piece's columns are whole panels.
constexpr int kPieceWidth = 64;

int linear_param_pieces(int I, int O) {
  return (std::max(I, O) + kPieceWidth - 1) / kPieceWidth;
}

// dW += dout^T . inp; db += 1^T . dout, the column sums of dout, which the product takes as
// it reads dout (gemm.h's a_row_sums) and rounds as a product by a column of ones would.
void linear_backward_params(float* dweight, float* dbias, const float* dout, const float* inp,
                            int R, int I, int O, int piece, Products products,
                            const uint8_t* rows_used) {
  const int begin = piece * kPieceWidth;
  GemmEpilogue bias_sums;
  if (O >= I) {  // rows [begin, end) of dW and db
    const int rows = std::min(O, begin + kPieceWidth) - begin;
    if (dbias) bias_sums.a_row_sums = dbias + begin;
    gemm(true, false, rows, I, R, 1.0f, dout + begin, O, inp, I, 1.0f,
         dweight + int64_t(begin) * I, I, products, bias_sums, rows_used);
  } else {  // columns [begin, end) of dW; db with the first piece
    const int cols = std::min(I, begin + kPieceWidth) - begin;
    if (dbias && piece == 0) bias_sums.a_row_sums = dbias;
    gemm(true, false, O, cols, R, 1.0f, dout, O, inp + begin, I, 1.0f, dweight + begin, I,
         products, bias_sums, rows_used);
  }
}

MINIVIT_ISA_END
}  // namespace minivit
