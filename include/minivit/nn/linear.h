#pragma once
// Fully connected layer, PyTorch layout: weight (O, I), bias (O).
//   out (R, O) = inp (R, I) . weight^T + bias
// Backward adds into every gradient it is given; pass nullptr for dinp when the input
// needs no gradient (the patch pixels). The bias gradient, the column sums of dout, is taken
// in the weight gradient's product as it reads dout (gemm.h's a_row_sums).
// `products` says which kernels compute the products and in what precision (gemm.h); the
// bias gradient's sums stay fp32.
#include "minivit/kernels/compute.h"  // Products
#include "minivit/kernels/isa.h"

namespace minivit {

// The weight a forward multiplies by: (O, I) as PyTorch stores it and, where the caller
// keeps one, its transpose (I, O), which the product reads as it lies instead of packing
// the rows of the other into columns on every call (the same sums, the same bits). A plain
// pointer converts to a weight without a transpose.
struct LinearWeight {
  const float* rows;                // (O, I)
  const float* columns = nullptr;   // (I, O): rows transposed, or null
  LinearWeight(const float* weight, const float* weight_transposed = nullptr)
      : rows(weight), columns(weight_transposed) {}
};

MINIVIT_ISA_BEGIN

// Whether a forward's products by these kernels read a weight's columns where it has them.
// OpenBLAS's never do: it packs either operand anyway, and where it picks its small-matrix
// kernels (its Cooperlake and SkylakeX ones) a row of W and a column of W^T are summed in
// different orders, so the two would differ in bits.
inline bool reads_weight_columns(GemmKernels kernels) { return kernels != GemmKernels::openblas; }

void linear_forward(float* out, const float* inp, LinearWeight weight, const float* bias, int R,
                    int I, int O, Products products);

// out (R, O) = residual (R, O) + (inp (R, I) . weight^T + bias), the branch of a residual
// connection and its add in one pass: the product adds the residual and the bias as it
// stores, rounding as residual + branch, then + bias.
void linear_residual_forward(float* out, const float* inp, LinearWeight weight,
                             const float* bias, const float* residual, int R, int I, int O,
                             Products products);

// pre (R, O) = inp (R, I) . weight^T + bias and gelu_out = GELU(pre) (nn/gelu.h) in one
// pass: the product applies the GELU to each tile of pre as it stores it. With slope_in_pre
// (a training forward) pre is left holding GELU's slope at pre instead, all that
// gelu_backward_slope needs.
void linear_gelu_forward(float* pre, float* gelu_out, const float* inp, LinearWeight weight,
                         const float* bias, int R, int I, int O, Products products,
                         bool slope_in_pre = false);

// dpre (R, I) = (dout (R, O) . weight) * slope (R, I), element by element: the input gradient
// of a linear layer whose input was GELU(pre), taken through the GELU as the product stores
// it, with slope as linear_gelu_forward's slope_in_pre left it. The same bits as
// linear_backward_input then gelu_backward_slope.
void linear_backward_input_gelu(float* dpre, const float* dout, const float* weight,
                                const float* slope, int R, int I, int O, Products products);

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int R, int I, int O,
                     Products products);

// The same backward in two halves, for a caller that takes the rows of a batch in chunks
// and the weight gradients, which sum over every row, afterwards (vit.cpp):
//   dinp += dout . W                                       (rows independent)
//   dW += dout^T . inp, db += 1^T . dout, piece by piece   (each piece one thread's)
// A piece is a block of up to 64 rows of dW (of 64 columns when I > O: the longer side is
// cut), with its share of db. Every element sums over the R rows in row order, whatever
// piece it falls in, so the cut changes no bit.
// With add_into false it sets dinp instead, sparing the clearing pass a scratch gradient
// would need (the same bits: the sum plus zero).
// rows_used (R), where given: 0 at the rows whose dout is zero (the patches patch dropout
// left out), which the products may skip (gemm's k_used).
void linear_backward_input(float* dinp, const float* dout, const float* weight, int R, int I,
                           int O, bool add_into, Products products);
int linear_param_pieces(int I, int O);
void linear_backward_params(float* dweight, float* dbias, const float* dout, const float* inp,
                            int R, int I, int O, int piece, Products products,
                            const uint8_t* rows_used = nullptr);

MINIVIT_ISA_END
}  // namespace minivit
