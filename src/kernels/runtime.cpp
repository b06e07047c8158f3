#include "minivit/kernels/runtime.h"

#include <cblas.h>
#include <strings.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace minivit {

const char* blas_kernel_name() { return openblas_get_corename(); }

// The kernel family OpenBLAS's sgemm is fastest with on this CPU, or nullptr where its own
// detection has nothing better to miss.
static const char* preferred_blas_kernels() {
  if (cpu_runs(Isa::avx512)) return "SkylakeX";
  if (cpu_runs(Isa::avx2)) return "Haswell";
  return nullptr;
}

std::string blas_kernel_advice(const Compute& compute) {
  if (compute.kernels != GemmKernels::openblas) return "";  // OpenBLAS computes no product
  const char* in_use = openblas_get_corename();
  const char* preferred = preferred_blas_kernels();
  if (!preferred) return "";
  const bool avx512_kernels = strcasecmp(in_use, "skylakex") == 0 ||
                              strcasecmp(in_use, "cooperlake") == 0 ||
                              strcasecmp(in_use, "sapphirerapids") == 0;
  const bool avx2_kernels = avx512_kernels || strcasecmp(in_use, "haswell") == 0 ||
                            strncasecmp(in_use, "zen", 3) == 0;
  const bool behind = strcmp(preferred, "SkylakeX") == 0 ? !avx512_kernels : !avx2_kernels;
  if (!behind) return "";
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  return std::string("note: OpenBLAS runs its ") + in_use + " kernels" +
         (forced ? std::string(" (OPENBLAS_CORETYPE=") + forced + " in the environment)" : "") +
         "; this CPU runs its faster " + preferred + " ones (unset OPENBLAS_CORETYPE, or set it to " +
         preferred + ")";
}

}  // namespace minivit
