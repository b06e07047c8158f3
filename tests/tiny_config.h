#pragma once
// The smallest model the tests build: 2x2 patches of 4x4 pixels, two channels, two blocks of
// width 8 and two heads, MLP 16, three classes.
#include "minivit/core/config.h"

namespace minivit_test {

inline minivit::ModelConfig tiny_model_config() {
  minivit::ModelConfig c;
  c.image_size = 8;
  c.channels = 2;
  c.patch_size = 4;
  c.dim = 8;
  c.depth = 2;
  c.heads = 2;
  c.mlp_dim = 16;
  c.num_classes = 3;
  return c;
}

}  // namespace minivit_test
