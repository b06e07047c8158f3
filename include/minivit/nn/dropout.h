#pragma once
// Inverted dropout: in training each element is kept with probability 1 - p and scaled by
// 1 / (1 - p), so evaluation is the identity. The keep-mask is drawn from the
// counter-based generator (rng.h) under `key`, one draw per element index, and cached as
// bytes for backward. With p == 0 or outside training, forward copies (or, in place, does
// nothing) and backward passes the gradient through.
#include <cstdint>
#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN

// out may alias inp. Element i draws at index first_index + i: a batch split over several
// processes (train/distributed.h) passes each shard's offset in the whole batch, so the
// masks do not depend on how the batch is split.
void dropout_forward(float* out, uint8_t* mask, const float* inp, int64_t n, float p,
                     uint64_t key, int64_t first_index = 0);

// dinp += dout * mask / (1 - p). Without add_into it writes dinp instead: 0 + the term, as
// an add into a cleared dinp rounds it (a zero's sign included).
void dropout_backward(float* dinp, const float* dout, const uint8_t* mask, int64_t n, float p,
                      bool add_into);

// The keep decision for one element, shared by every user of dropout masks.
bool dropout_keep(uint64_t key, int64_t index, float p);

MINIVIT_ISA_END
}  // namespace minivit
