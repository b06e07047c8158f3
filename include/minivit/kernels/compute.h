#pragma once
// How a run computes: which instruction-set level runs the layers (kernels/isa.h), which
// kernels compute the matrix products, and on how many threads. A caller holds one (the
// run's Activations, the benchmark, a test) and hands it to vit_forward, vit_backward and
// gemm; nothing about it is process-wide.
#include <optional>
#include <string>

#include "minivit/core/config.h"  // Precision

namespace minivit {

// The levels the layers are compiled for, lowest first.
enum class Isa { x86_64, avx2, avx512 };

// avx512: minivit's kernels, bf16 products on AVX512_BF16 where the CPU has it; amx: the same
// with the bf16 products on AMX tiles; avx2: minivit's kernels on 8-lane vectors, fp32 only;
// openblas: OpenBLAS, fp32 only.
enum class GemmKernels { avx2, avx512, amx, openblas };

// What the CPU reports (cpuid, and for AVX and AMX the operating system's leave to use their
// registers). Read once: a property of the machine.
bool cpu_runs(Isa isa);
bool cpu_runs(GemmKernels kernels);
bool cpu_has_avx512_bf16();
Isa best_isa();
const char* isa_name(Isa isa);  // "x86-64", "AVX2", "AVX-512"

struct Compute {
  GemmKernels kernels = GemmKernels::openblas;
  Isa isa = Isa::x86_64;  // of the layers; at least what `kernels` need
  int threads = 0;        // for the passes handed this; 0: the calling thread's OpenMP setting

  // The fastest this CPU can run: AMX, AVX-512, AVX2 kernels in that order, else OpenBLAS,
  // with the layers at the best level. MINIVIT_GEMM (auto, openblas, avx2, avx512, amx) in
  // the environment forces the kernels, and with them the level (openblas keeps the best);
  // MINIVIT_ISA (auto, x86-64, avx2, avx512) caps the level, and with it the kernels, as on a
  // CPU that stops there. A value that cannot be followed leaves the automatic choice (see
  // environment_note).
  static Compute automatic();
  // The given kernels, with the level they need; nullopt when this CPU cannot run them.
  static std::optional<Compute> with_kernels(GemmKernels kernels);
  // Why MINIVIT_ISA or MINIVIT_GEMM was not followed, a line on stderr for each; "" when
  // both were or are unset.
  static std::string environment_note();

  // Whether gemm computes Precision::bf16 products in bf16 with these kernels.
  bool bf16_products() const;
  // The precision a request for `asked` is computed in: bf16 falls back to fp32.
  Precision effective_precision(Precision asked) const;
  // A line for the user when bf16 was asked for and cannot be had, else "".
  std::string precision_note(Precision asked) const;
  // "minivit AVX2", "minivit AVX-512", "minivit AVX-512 + AMX" or "OpenBLAS <its kernel
  // family>", for logs and the benchmark.
  std::string kernels_name() const;
};

// What one gemm call computes with: the kernels and the precision of the products.
struct Products {
  GemmKernels kernels = GemmKernels::openblas;
  Precision precision = Precision::fp32;
};

// Sets the calling thread's OpenMP thread count to `threads` (when above 0) for the life of
// the object, restoring the previous count after, even when the work throws.
class ThreadsScope {
 public:
  explicit ThreadsScope(int threads);
  ~ThreadsScope();
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int saved_;
};

}  // namespace minivit
