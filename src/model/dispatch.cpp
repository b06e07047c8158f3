// vit_forward, vit_backward and make_forward_weights for the code compiled once
// (kernels/isa.h): the level acts.compute names, on acts.compute's threads.
#include "minivit/core/error.h"
#include "minivit/model/vit.h"

namespace minivit {

#define MINIVIT_DECLARE_PASSES(level)                                                       \
  namespace level {                                                                         \
  void vit_forward(const ViT& model, Activations& acts, const float* images, int B,         \
                   bool training, uint64_t dropout_key, int first_sample);                  \
  void vit_backward(ViT& model, Activations& acts, int B);                                  \
  void make_forward_weights(const ViT& model, Activations& acts);                           \
  }
MINIVIT_DECLARE_PASSES(isa_x86_64)
MINIVIT_DECLARE_PASSES(isa_avx2)
MINIVIT_DECLARE_PASSES(isa_avx512)
#undef MINIVIT_DECLARE_PASSES

namespace {

// The CPU is asked, not trusted: a Compute built by hand for a level it lacks is an error, not
// an illegal instruction.
void check_level(const Compute& compute) {
  if (!cpu_runs(compute.isa))
    throw Error(std::string("compute: this CPU cannot run the ") + isa_name(compute.isa) +
                " level");
  if (!cpu_runs(compute.kernels))
    throw Error("compute: this CPU cannot run the " + compute.kernels_name() + " kernels");
  const bool avx512_kernels =
      compute.kernels == GemmKernels::avx512 || compute.kernels == GemmKernels::amx;
  if ((avx512_kernels && compute.isa != Isa::avx512) ||
      (compute.kernels == GemmKernels::avx2 && compute.isa != Isa::avx2))
    throw Error("compute: the " + compute.kernels_name() + " kernels are compiled into the " +
                (avx512_kernels ? "AVX-512" : "AVX2") + " level only, not the " +
                isa_name(compute.isa) + " one");
}

}  // namespace

inline namespace dispatch {

void vit_forward(const ViT& model, Activations& acts, const float* images, int B, bool training,
                 uint64_t dropout_key, int first_sample) {
  check_level(acts.compute);
  ThreadsScope threads(acts.compute.threads);
  switch (acts.compute.isa) {
    case Isa::avx512:
      return isa_avx512::vit_forward(model, acts, images, B, training, dropout_key, first_sample);
    case Isa::avx2:
      return isa_avx2::vit_forward(model, acts, images, B, training, dropout_key, first_sample);
    case Isa::x86_64:
      return isa_x86_64::vit_forward(model, acts, images, B, training, dropout_key, first_sample);
  }
}

void vit_backward(ViT& model, Activations& acts, int B) {
  check_level(acts.compute);
  ThreadsScope threads(acts.compute.threads);
  switch (acts.compute.isa) {
    case Isa::avx512: return isa_avx512::vit_backward(model, acts, B);
    case Isa::avx2: return isa_avx2::vit_backward(model, acts, B);
    case Isa::x86_64: return isa_x86_64::vit_backward(model, acts, B);
  }
}

void make_forward_weights(const ViT& model, Activations& acts) {
  check_level(acts.compute);
  ThreadsScope threads(acts.compute.threads);
  switch (acts.compute.isa) {
    case Isa::avx512: return isa_avx512::make_forward_weights(model, acts);
    case Isa::avx2: return isa_avx2::make_forward_weights(model, acts);
    case Isa::x86_64: return isa_x86_64::make_forward_weights(model, acts);
  }
}

}  // namespace dispatch
}  // namespace minivit
