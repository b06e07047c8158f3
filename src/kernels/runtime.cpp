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

// The instructions each family of OpenBLAS 0.3.21's x86-64 kernels needs beyond SSE3, by
// the name openblas_get_corename() gives it (its driver/others/dynamic.c).
struct CoreNeeds {
  const char* core;
  const char* needs;  // in words, for the message
  bool (*runs)();
};

// The AVX-512 and AVX2 levels as minivit's own kernels are chosen (kernels/compute.h); AVX
// alone, which no level of minivit's is, from libgcc's reading of cpuid.
static bool has_avx512() { return cpu_runs(Isa::avx512); }
static bool has_avx512_bf16() { return cpu_has_avx512_bf16(); }
static bool has_avx2() { return cpu_runs(Isa::avx2); }
static bool has_avx() { return __builtin_cpu_supports("avx"); }

static const CoreNeeds kCoreNeeds[] = {
    {"SkylakeX", "AVX-512", has_avx512},
    {"Cooperlake", "AVX-512 with AVX512_BF16", has_avx512_bf16},
    {"SapphireRapids", "AVX-512 with AVX512_BF16", has_avx512_bf16},
    {"Haswell", "AVX2 and FMA", has_avx2},
    {"Zen", "AVX2 and FMA", has_avx2},
    {"Excavator", "AVX2 and FMA", has_avx2},
    {"Sandybridge", "AVX", has_avx},
    {"Bulldozer", "AVX", has_avx},
    {"Piledriver", "AVX", has_avx},
    {"Steamroller", "AVX", has_avx},
};

std::string blas_core_problem() {
  const char* in_use = openblas_get_corename();
  for (const CoreNeeds& c : kCoreNeeds) {
    if (strcasecmp(in_use, c.core) != 0 || c.runs()) continue;
    const char* forced = std::getenv("OPENBLAS_CORETYPE");
    const char* instead = preferred_blas_kernels();
    return std::string("OPENBLAS_CORETYPE=") + (forced ? forced : "(unset)") +
           ": OpenBLAS would run its " + in_use + " kernels, which need " + c.needs +
           ", missing on this CPU; unset OPENBLAS_CORETYPE" +
           (instead ? std::string(" or set it to ") + instead : std::string());
  }
  return "";
}

}  // namespace minivit
