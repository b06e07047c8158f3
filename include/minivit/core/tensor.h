#pragma once
// Dimension letters used in shape comments throughout minivit:
//   B  batch size            T  tokens = N, + 1 with a CLS token (model.pool = cls)
//   N  patches = G * G        G  patch grid side = image_size / P
//   C  image channels         P  patch side in pixels
//   D  model width (dim)      H  attention heads      Dh  head width = D / H
//   M  MLP hidden width       K  classes              L  depth (blocks)
//   R  rows of a batched matrix product (usually B * T)
// Buffers are row-major; the last dimension is contiguous.
#include <cstdint>

#include <xtensor/xtensor.hpp>

namespace minivit {

using Tensor1 = xt::xtensor<float, 1>;
using Tensor2 = xt::xtensor<float, 2>;
using Tensor3 = xt::xtensor<float, 3>;
using Tensor4 = xt::xtensor<float, 4>;
using Mask1 = xt::xtensor<uint8_t, 1>;  // dropout keep-masks, one byte per element

}  // namespace minivit
