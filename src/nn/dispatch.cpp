// The sizes of the layers' scratch, for the code compiled once (kernels/isa.h), which sizes
// the run state. They do not depend on the level; the baseline's answer them.
#include "minivit/nn/attention.h"
#include "minivit/nn/drop_path.h"
#include "minivit/nn/layernorm.h"
#include "minivit/nn/linear.h"

namespace minivit {

namespace isa_x86_64 {
int64_t attention_scratch_floats(int T, int Dh);
int64_t attention_score_grad_floats(int B, int H, int Dh);
int64_t layernorm_partials_floats(int D);
int linear_param_pieces(int I, int O);
float drop_path_rate(float rate, int block, int depth);
}  // namespace isa_x86_64

inline namespace dispatch {

int64_t attention_scratch_floats(int T, int Dh) {
  return isa_x86_64::attention_scratch_floats(T, Dh);
}
int64_t attention_score_grad_floats(int B, int H, int Dh) {
  return isa_x86_64::attention_score_grad_floats(B, H, Dh);
}
int64_t layernorm_partials_floats(int D) { return isa_x86_64::layernorm_partials_floats(D); }
int linear_param_pieces(int I, int O) { return isa_x86_64::linear_param_pieces(I, O); }
float drop_path_rate(float rate, int block, int depth) {
  return isa_x86_64::drop_path_rate(rate, block, depth);
}

}  // namespace dispatch
}  // namespace minivit
