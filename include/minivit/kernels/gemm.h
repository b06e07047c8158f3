#pragma once
// The only door to BLAS. Row-major single-precision matrix product
//   C (M, N) = alpha * op(A) (M, K) * op(B) (K, N) + beta * C
// where op(X) is X or X^T. Leading dimensions let callers address sub-matrices (one
// attention head inside a fused qkv buffer, one column block of a weight gradient)
// without copies, and beta = 1 lets backward passes add into gradients in place.
//
// Kernels: `products.kernels` (kernels/compute.h): minivit's own, made for these tall and
// thin shapes, on AVX-512 (sgemm_avx512.h), with the bf16 products on AVX512_BF16 or AMX
// tiles, or on AVX2 and FMA (sgemm_avx2.h); or OpenBLAS. Compute::automatic() picks the
// fastest the CPU runs.
//
// Threading: minivit runs one pool of OpenMP threads (threads.h). BLAS itself is kept
// single-threaded and gemm() splits large products across the pool by rows (or columns) of
// C, so the two never compete for the cores. Inside a parallel region gemm() runs on the
// calling thread.
//
// Precision: Precision::bf16 in `products` asks for op(A) and op(B) rounded to bfloat16 and their
// products summed in fp32 (mixed precision, as torch.autocast's bf16 matmuls), which
// AVX512_BF16 computes at twice the fp32 rate, and AMX several times faster still. Where the kernels cannot
// (Compute::bf16_products() false) the product is computed in fp32 instead.
#include "minivit/core/config.h"  // Precision
#include "minivit/kernels/compute.h"
#include "minivit/kernels/isa.h"

#include <cstdint>

namespace minivit {

// What a product does to C as it stores it, so that no pass over C afterwards has to:
//   C = alpha op(A) op(B) + beta C (+ residual) (+ bias)
// bias: [N], added to every row of C; residual: (M, N) at ld_residual, another matrix added
// element by element (a block's input, in the residual connections). Both are summed in the
// order the separate passes would have summed them, so fusing changes no bit: without a
// residual the bias joins the first block of k (as a C seeded with the bias would), with one
// the bias comes last, after the whole product and the residual.
// Then gelu: (M, N) at ld_gelu gets GELU(C) of the finished C (vecmath.h's, as nn/gelu.cpp
// computes it), and C keeps the value before it; with gelu_slope C keeps GELU's slope there
// instead, the one factor backward needs, computed from the same erfc while the tile is in L1.
// Last scale: C = 0 + C * scale, (M, N) at ld_scale, element by element: backward's product
// through that slope (the 0 + rounds as gelu_backward's pass, which sets a gradient).
// Apart from C, a_row_sums: [M] += the sums of op(A)'s rows over k, what a product
// ones^T op(A)^T into it with beta = 1 by minivit's fp32 kernels gives, bit for bit: each
// block of 128 k summed in order from zero, then added on (k_used's k skipped). A weight
// gradient dW += dout^T x takes its bias gradient db += 1^T dout so, and minivit's kernels
// sum each block of dout as they read or pack it for the product, where a product or a
// pass of its own read dout again from beyond the L2 cache. Any beta; A transposed only,
// as a weight gradient's dout^T is.
struct GemmEpilogue {
  const float* bias = nullptr;      // [N]
  const float* residual = nullptr;  // (M, N), row stride ld_residual
  int64_t ld_residual = 0;
  float* gelu = nullptr;            // (M, N), row stride ld_gelu
  int64_t ld_gelu = 0;
  bool gelu_slope = false;
  const float* scale = nullptr;     // (M, N), row stride ld_scale
  int64_t ld_scale = 0;
  float* a_row_sums = nullptr;      // [M]

  // Nothing done to C (a_row_sums may still be asked for).
  bool empty() const { return !bias && !residual && !gelu && !scale; }
};

MINIVIT_ISA_BEGIN

// k_used (K), where given: 0 at each k whose terms op(A)(i, k) op(B)(k, j) are all exact
// zeros, one factor zero and the other finite (a weight gradient's rows for patches that
// patch dropout left out). minivit's fp32 kernels skip those k; a sum that starts at +0 is
// unchanged by adding them, so the result is the same bit for bit, and other kernels may
// add them.
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc, Products products,
          const GemmEpilogue& epilogue = {}, const uint8_t* k_used = nullptr);

// Whether gemm, at this level with these products, never reads the terms of a k that k_used
// marks unused: then they need not be zeros, nor even finite.
bool skips_unused_k(Products products);

MINIVIT_ISA_END
}  // namespace minivit
