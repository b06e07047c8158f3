#include "minivit/kernels/runtime.h"

#include <unistd.h>

#include <cstdlib>

#include "minivit/kernels/gemm.h"

namespace minivit {

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
