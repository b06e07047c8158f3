#include "minivit/kernels/compute.h"

#include <cblas.h>
#include <cpuid.h>
#include <omp.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "minivit/core/error.h"
#include "minivit/kernels/runtime.h"

namespace minivit {

// AMX needs the CPU's tiles and the kernel's leave to use their state (Linux 5.16 and later
// grant it per process on request).
static bool amx_usable() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool tile = edx & (1u << 24), bf16 = edx & (1u << 22);
  constexpr long kRequestPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM
  constexpr long kTileData = 18;               // XFEATURE_XTILEDATA
  return tile && bf16 && syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
}

namespace {

// What cpuid reports, with the operating system's leave (XCR0) to use the AVX and AVX-512
// registers, read once: a property of the machine.
struct CpuLevels {
  bool avx2 = false, avx512 = false, avx512_bf16 = false;
};

bool bit(unsigned reg, int n) { return (reg >> n) & 1u; }

CpuLevels read_cpu_levels() {
  CpuLevels levels;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return levels;
  const bool fma = bit(c, 12), movbe = bit(c, 22), osxsave = bit(c, 27), avx = bit(c, 28),
             f16c = bit(c, 29);
  if (!osxsave || !avx) return levels;
  unsigned xcr0_low, xcr0_high;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  const bool ymm_state = (xcr0_low & 0x6u) == 0x6u, zmm_state = (xcr0_low & 0xe0u) == 0xe0u;
  unsigned a7 = 0, b7 = 0, c7 = 0, d7 = 0, a71 = 0, b71 = 0, c71 = 0, d71 = 0;
  __get_cpuid_count(7, 0, &a7, &b7, &c7, &d7);
  __get_cpuid_count(7, 1, &a71, &b71, &c71, &d71);
  unsigned ax = 0, bx = 0, cx = 0, dx = 0;
  __get_cpuid(0x80000001u, &ax, &bx, &cx, &dx);
  const bool lzcnt = bit(cx, 5);
  // x86-64-v3 and x86-64-v4, the levels' -march (kernels/isa.h).
  levels.avx2 = ymm_state && fma && movbe && f16c && lzcnt && bit(b7, 3) /* BMI1 */ &&
                bit(b7, 5) /* AVX2 */ && bit(b7, 8) /* BMI2 */;
  levels.avx512 = levels.avx2 && zmm_state && bit(b7, 16) /* F */ && bit(b7, 17) /* DQ */ &&
                  bit(b7, 28) /* CD */ && bit(b7, 30) /* BW */ && bit(b7, 31) /* VL */;
  levels.avx512_bf16 = levels.avx512 && bit(a71, 5);
  return levels;
}

const CpuLevels& cpu_levels() {
  static const CpuLevels levels = read_cpu_levels();
  return levels;
}

}  // namespace

bool cpu_runs(Isa isa) {
  switch (isa) {
    case Isa::x86_64: return true;
    case Isa::avx2: return cpu_levels().avx2;
    case Isa::avx512: return cpu_levels().avx512;
  }
  return false;
}

bool cpu_has_avx512_bf16() { return cpu_levels().avx512_bf16; }

bool cpu_runs(GemmKernels kernels) {
  switch (kernels) {
    case GemmKernels::openblas: return true;
    case GemmKernels::avx2: return cpu_runs(Isa::avx2);
    case GemmKernels::avx512: return cpu_runs(Isa::avx512);
    case GemmKernels::amx: {
      static const bool usable = cpu_has_avx512_bf16() && amx_usable();
      return usable;
    }
  }
  return false;
}

Isa best_isa() {
  return cpu_runs(Isa::avx512) ? Isa::avx512 : cpu_runs(Isa::avx2) ? Isa::avx2 : Isa::x86_64;
}

const char* isa_name(Isa isa) {
  return isa == Isa::avx512 ? "AVX-512" : isa == Isa::avx2 ? "AVX2" : "x86-64";
}

std::optional<Compute> Compute::with_kernels(GemmKernels kernels) {
  if (!cpu_runs(kernels)) return std::nullopt;
  Compute c;
  c.kernels = kernels;
  c.isa = kernels == GemmKernels::avx2 ? Isa::avx2
          : kernels == GemmKernels::openblas ? best_isa()
                                             : Isa::avx512;
  return c;
}

// The level a set of kernels is compiled into; OpenBLAS's calls are made from any level.
static Isa level_of(GemmKernels kernels) {
  return kernels == GemmKernels::avx2       ? Isa::avx2
         : kernels == GemmKernels::openblas ? Isa::x86_64
                                            : Isa::avx512;
}

// `kernels` where this CPU runs them within `cap`; OpenBLAS's with the layers at the cap.
static std::optional<Compute> within(GemmKernels kernels, Isa cap) {
  auto c = Compute::with_kernels(kernels);
  if (!c || level_of(kernels) > cap) return std::nullopt;
  if (kernels == GemmKernels::openblas) c->isa = cap;
  return c;
}

// The fastest kernels this CPU runs within `cap`.
static Compute fastest(Isa cap) {
  for (GemmKernels k : {GemmKernels::amx, GemmKernels::avx512, GemmKernels::avx2})
    if (auto c = within(k, cap)) return *c;
  return *within(GemmKernels::openblas, cap);
}

namespace {

// A word an environment variable may hold, and what it asks for.
template <typename T>
struct Word {
  const char* word;
  T value;
};

// An environment variable's choice among `words`, nullopt for auto or unset; `known` false
// for a word not among them.
template <typename T, size_t N>
std::optional<T> word_asked(const char* env, const Word<T> (&words)[N], bool& known) {
  known = true;
  if (!env || !*env || strcasecmp(env, "auto") == 0) return std::nullopt;
  for (const Word<T>& w : words)
    if (strcasecmp(env, w.word) == 0) return w.value;
  known = false;
  return std::nullopt;
}

// "expected auto, a, b or c", for a word not among `words`.
template <typename T, size_t N>
std::string expected_words(const Word<T> (&words)[N]) {
  std::string list = "expected auto";
  for (size_t i = 0; i < N; ++i) list += std::string(i + 1 < N ? ", " : " or ") + words[i].word;
  return list;
}

constexpr Word<GemmKernels> kKernelWords[] = {{"openblas", GemmKernels::openblas},
                                              {"avx2", GemmKernels::avx2},
                                              {"avx512", GemmKernels::avx512},
                                              {"amx", GemmKernels::amx}};
constexpr Word<Isa> kLevelWords[] = {
    {"x86-64", Isa::x86_64}, {"avx2", Isa::avx2}, {"avx512", Isa::avx512}};

}  // namespace

// The highest level the run may use: MINIVIT_ISA's where this CPU runs it, else the CPU's.
static Isa level_cap() {
  bool known;
  const auto asked = word_asked(std::getenv("MINIVIT_ISA"), kLevelWords, known);
  return asked && cpu_runs(*asked) ? *asked : best_isa();
}

Compute Compute::automatic() {
  bool known;
  const Isa cap = level_cap();
  Compute c = fastest(cap);
  if (auto asked = word_asked(std::getenv("MINIVIT_GEMM"), kKernelWords, known))
    if (auto k = within(*asked, cap)) c = *k;
  if (c.kernels == GemmKernels::openblas)  // else OpenBLAS's first product would kill us
    if (const std::string problem = blas_core_problem(); !problem.empty()) throw Error(problem);
  return c;
}

// Why MINIVIT_ISA was not followed, "" when it was or is unset.
static std::string level_note() {
  const char* env = std::getenv("MINIVIT_ISA");
  bool known;
  const auto asked = word_asked(env, kLevelWords, known);
  if (known && (!asked || cpu_runs(*asked))) return "";
  const std::string why = !known ? expected_words(kLevelWords)
                                 : std::string("this CPU has no ") + isa_name(*asked);
  return std::string("minivit: MINIVIT_ISA=") + env + ": " + why + "; the layers run at " +
         isa_name(best_isa());
}

// Why MINIVIT_GEMM was not followed, "" when it was or is unset.
static std::string kernels_note() {
  const char* env = std::getenv("MINIVIT_GEMM");
  bool known;
  const auto asked = word_asked(env, kKernelWords, known);
  const Isa cap = level_cap();
  if (known && (!asked || within(*asked, cap))) return "";
  std::string why;
  if (!known)
    why = expected_words(kKernelWords);
  else if (!cpu_runs(*asked))
    why = *asked == GemmKernels::amx      ? "this CPU has no AMX tiles usable here"
          : *asked == GemmKernels::avx512 ? "this CPU has no AVX-512"
                                          : "this CPU has no AVX2 and FMA";
  else
    why = std::string("these kernels need the ") + isa_name(level_of(*asked)) +
          " level, above MINIVIT_ISA's " + isa_name(cap);
  return std::string("minivit: MINIVIT_GEMM=") + env + ": " + why + "; using " +
         fastest(cap).kernels_name();
}

std::string Compute::environment_note() {
  const std::string level = level_note(), kernels = kernels_note();
  return level.empty() || kernels.empty() ? level + kernels : level + "\n" + kernels;
}

bool Compute::bf16_products() const {
  return kernels == GemmKernels::amx || (kernels == GemmKernels::avx512 && cpu_has_avx512_bf16());
}

Precision Compute::effective_precision(Precision asked) const {
  return asked == Precision::bf16 && !bf16_products() ? Precision::fp32 : asked;
}

std::string Compute::precision_note(Precision asked) const {
  if (effective_precision(asked) == asked) return "";
  const std::string why = cpu_has_avx512_bf16()
                              ? "the products run on " + kernels_name() + " (MINIVIT_GEMM)"
                              : std::string("this CPU has no AVX512_BF16 (Zen 4, Sapphire "
                                            "Rapids and later have it)");
  return "note: train.precision = \"bf16\": " + why + "; the blocks' products run in fp32";
}

std::string Compute::kernels_name() const {
  if (kernels == GemmKernels::avx2) return "minivit AVX2";
  if (kernels == GemmKernels::avx512) return "minivit AVX-512";
  if (kernels == GemmKernels::amx) return "minivit AVX-512 + AMX";
  return std::string("OpenBLAS ") + openblas_get_corename();
}

ThreadsScope::ThreadsScope(int threads) : saved_(omp_get_max_threads()) {
  if (threads > 0) omp_set_num_threads(threads);
}

ThreadsScope::~ThreadsScope() { omp_set_num_threads(saved_); }

}  // namespace minivit
