#include "minivit/nn/linear.h"

#include <omp.h>

#include <cstdint>
#include <cstddef>

#include "minivit/kernels/gemm.h"

namespace minivit {

void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int R,
                    int I, int O) {
  float beta = 0.0f;
  if (bias) {
    // Seed every output row with the bias so the product can accumulate onto it.
#pragma omp parallel for schedule(static) if (int64_t(R) * O > 65536)
    for (int r = 0; r < R; ++r) {
      float* row = out + int64_t(r) * O;
      for (int o = 0; o < O; ++o) row[o] = bias[o];
    }
    beta = 1.0f;
  }
  gemm(false, true, R, O, I, 1.0f, inp, I, weight, I, beta, out, O);
}

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int R, int I, int O,
                     const float* ones) {
  // forward: out = inp . W^T + b
  if (dinp) gemm(false, false, R, I, O, 1.0f, dout, O, weight, I, 1.0f, dinp, I);  // dinp += dout . W
  gemm(true, false, O, I, R, 1.0f, dout, O, inp, I, 1.0f, dweight, I);  // dW += dout^T . inp
  if (dbias) {
    // Column sums of dout as the product ones(1, R) . dout: BLAS reads dout row by row,
    // where a plain loop over columns would stride through memory.
    gemm(true, false, 1, O, R, 1.0f, ones, 1, dout, O, 1.0f, dbias, O);  // db += 1^T . dout
  }
}

}  // namespace minivit
