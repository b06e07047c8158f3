#pragma once
// Fully connected layer, PyTorch layout: weight (O, I), bias (O).
//   out (R, O) = inp (R, I) . weight^T + bias
// Backward adds into every gradient it is given; pass nullptr for dinp when the input
// needs no gradient (the patch pixels). The bias gradient is the product ones^T . dout, so
// backward reads `ones`, at least R floats of 1, when dbias is given.
namespace minivit {

void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int R,
                    int I, int O);

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int R, int I, int O,
                     const float* ones);

}  // namespace minivit
