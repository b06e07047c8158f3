#pragma once
// The model the attention inspection tests build: tiny_model_config's blocks on 12-pixel
// grey images, 3 x 3 patches of 4 pixels; T = 10 tokens with a CLS token, else 9.
#include <cmath>
#include <vector>

#include "minivit/core/config.h"
#include "tiny_config.h"

namespace minivit_test {

inline minivit::ModelConfig small_attention_config(minivit::PoolKind pool) {
  minivit::ModelConfig c = tiny_model_config();
  c.image_size = 12;
  c.channels = 1;
  c.pool = pool;
  return c;
}

// A smooth normalised image (C, S, S) for config c: scale * sin(0.7 i) at flat index i.
inline std::vector<float> sine_image(const minivit::ModelConfig& c, float scale = 1.f) {
  std::vector<float> x(size_t(c.channels) * c.image_size * c.image_size);
  for (size_t i = 0; i < x.size(); ++i) x[i] = scale * float(std::sin(0.7 * double(i)));
  return x;
}

}  // namespace minivit_test
