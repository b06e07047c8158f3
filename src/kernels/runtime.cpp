#include "minivit/kernels/runtime.h"

#include <unistd.h>

#include <cblas.h>
#include <strings.h>

#include <cstdlib>
#include <string>

#include "minivit/kernels/gemm.h"

namespace minivit {

const char* blas_kernel_name() { return openblas_get_corename(); }

// The AVX-512 subset OpenBLAS's SkylakeX kernels use.
static bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

const char* preferred_blas_kernels() {
  if (strcasecmp(openblas_get_corename(), "prescott") != 0) return nullptr;  // detection worked
  if (cpu_has_avx512()) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

std::string blas_kernel_advice() {
  if (gemm_kernels() != GemmKernels::openblas) return "";  // OpenBLAS computes no product
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  if (!forced) return "";
  const char* in_use = openblas_get_corename();
  const bool avx512_kernels = strcasecmp(in_use, "skylakex") == 0 ||
                              strcasecmp(in_use, "cooperlake") == 0 ||
                              strcasecmp(in_use, "sapphirerapids") == 0;
  if (!cpu_has_avx512() || avx512_kernels) return "";
  return std::string("note: OPENBLAS_CORETYPE=") + forced + " in the environment holds OpenBLAS to its " +
         in_use + " kernels; this CPU has AVX-512, whose kernels are usually faster (unset "
         "OPENBLAS_CORETYPE to let OpenBLAS choose, or set it to SkylakeX)";
}

// Iterations libgomp spins before sleeping; measured with `minivit bench` on an idle and on
// a shared machine (see README, Performance).
static constexpr const char* kSpinCount = "10000";

void restart_with_tuned_runtime(char** argv) {
  if (std::getenv("MINIVIT_RUNTIME_SET")) return;  // already restarted once
  bool changed = false;
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    if (const char* kernels = preferred_blas_kernels()) {
      setenv("OPENBLAS_CORETYPE", kernels, 1);
      changed = true;
    }
  }
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) {
    setenv("GOMP_SPINCOUNT", kSpinCount, 1);
    changed = true;
  }
  if (!changed) return;
  setenv("MINIVIT_RUNTIME_SET", "1", 1);
  ::execv("/proc/self/exe", argv);
  // exec failed (no /proc?): carry on with the libraries as they were loaded.
}

}  // namespace minivit
