// Times four parts of the training step alone, on one thread, at the shapes the configs
// give them: minivit's products beside OpenBLAS's, the attention core's forward and
// backward, GELU with its slope, and LayerNorm's forward and input gradient. Each figure is
// the best of many short rounds, which on a shared machine moves far less than a whole
// step: the figures for changes too small for `bench` to see.
//
//   build/parts-bench [--isa x86_64|avx2|avx512] [--rounds N] [--only PART]
//
// --isa picks the instruction-set level whose code runs (default: the best the CPU runs), so
// that an AVX-512 CPU also measures the AVX2 path. The x86-64 level has no kernels of its
// own; its products are OpenBLAS's. Figures: experiments/performance/results.md.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "minivit/core/rng.h"
#include "minivit/kernels/compute.h"
#include "minivit/kernels/gemm.h"
#include "minivit/kernels/threads.h"
#include "minivit/nn/attention.h"
#include "minivit/nn/linear.h"

namespace minivit {
// The levels' own functions, as kernels/dispatch.cpp declares gemm's.
#define MINIVIT_DECLARE_PARTS(level)                                                          \
  namespace level {                                                                           \
  void attention_forward(float* out, float* att, uint8_t* att_mask, const float* qkv, int B,  \
                         int T, int D, int H, const AttentionScore& score, float dropout_p,   \
                         uint64_t dropout_key, float* scratch, int slots,                     \
                         int64_t mask_first_index);                                           \
  void attention_backward(float* dqkv, const AttentionScoreGrad& dscore, const float* dout,   \
                          const float* qkv, const float* att, const uint8_t* att_mask, int B, \
                          int T, int D, int H, const AttentionScore& score, float dropout_p,  \
                          float* scratch, int slots);                                         \
  int64_t attention_scratch_floats(int T, int Dh);                                            \
  int64_t attention_score_grad_floats(int B, int H, int Dh);                                  \
  void gelu_and_slope(float* gelu_out, float* x, int n);                                      \
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,              \
                         const float* weight, const float* bias, int R, int D);               \
  void layernorm_backward_input(float* dinp, const float* dout, const float* inp,             \
                                const float* weight, const float* mean, const float* rstd,    \
                                int R, int D, const float* dinp_base);                        \
  void linear_backward_params(float* dweight, float* dbias, const float* dout,                \
                              const float* inp, int R, int I, int O, int piece,               \
                              Products products, const uint8_t* rows_used);                   \
  }
MINIVIT_DECLARE_PARTS(isa_x86_64)
MINIVIT_DECLARE_PARTS(isa_avx2)
MINIVIT_DECLARE_PARTS(isa_avx512)
#undef MINIVIT_DECLARE_PARTS
}  // namespace minivit

using namespace minivit;

namespace {

// Seconds a call of `work` takes: the best of `rounds` rounds of at least 8 ms each.
template <typename Work>
double best_seconds(int rounds, Work&& work) {
  using Clock = std::chrono::steady_clock;
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    int calls = 0;
    double elapsed = 0.0;
    const auto start = Clock::now();
    do {
      work();
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < 0.008);
    best = std::min(best, elapsed / calls);
  }
  return best;
}

// n draws of N(0, stddev^2) from the project's counter-based generator, stream `key`.
std::vector<float> random_floats(size_t n, uint64_t key, float stddev = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = stddev * float(rng_normal(key, i));
  return v;
}

// A product. The blocks' are timed with the shapes and operand layouts a training step gives
// them (their bias, residual, GELU and slope epilogues aside): the forward and input-gradient
// products one call on a chunk of 8 images (model/vit_passes.h), the forward reading W^T in
// place as the step's does; a weight gradient (`pieces`), dW (+)= dY^T x over the whole
// batch, through the layer's own linear_backward_params, piece by piece (64 rows of dW, or
// 64 columns where dW is wider than tall), each piece adding into dW and taking the bias
// gradient's row sums as it reads dY. Products of a whole batch at once are no guide to those: B packed for the
// weight gradients' strided reads ran them about 20% faster there, 5% here, and left a
// step's profile where it was (results.md, 2026-12-06). The stem's are timed whole.
struct Shape {
  const char* what;
  bool trans_a, trans_b;
  int M, N, K;
  bool pieces = false;
};

// A width-64 model (MLP 128) on 14 kept tokens, the default config's training: 112 rows a
// chunk, 1792 a batch; and the CIFAR-10 conv stem's two stages over a batch of 128 at 75% of
// the patches dropped (about 144 of 256 positions a first-stage image computes, 16 kept
// tokens).
const Shape kShapes[] = {
    {"qkv forward      x W^T", false, false, 112, 192, 64},
    {"fc1 forward      x W^T", false, false, 112, 128, 64},
    {"fc2 forward      x W^T", false, false, 112, 64, 128},
    {"qkv input grad   dY W ", false, false, 112, 64, 192},
    {"fc1 input grad   dY W ", false, false, 112, 64, 128},
    {"fc2 input grad   dY W ", false, false, 112, 128, 64},
    {"qkv weight grad  dY^T x", true, false, 192, 64, 1792, true},
    {"fc1 weight grad  dY^T x", true, false, 128, 64, 1792, true},
    {"fc2 weight grad  dY^T x", true, false, 64, 128, 1792, true},
    {"stem 1 forward   x W^T", false, true, 18432, 32, 27},
    {"stem 2 forward   x W^T", false, true, 2048, 64, 288},
    {"stem 2 input grad dY W", false, false, 2048, 288, 64},
    {"stem 2 weight grad   ", true, false, 64, 288, 2048},
};

template <typename Level>
void time_products(Level level, GemmKernels kernels, int rounds) {
  std::printf("products, GFLOP/s (%s | OpenBLAS), fp32:\n",
              kernels == GemmKernels::avx2     ? "minivit AVX2"
              : kernels == GemmKernels::avx512 ? "minivit AVX-512"
                                               : "OpenBLAS");
  for (const Shape& s : kShapes) {
    const auto A = random_floats(size_t(s.M) * s.K, 1), B = random_floats(size_t(s.N) * s.K, 2);
    std::vector<float> C(size_t(s.M) * s.N), row_sums(s.M);
    const int lda = s.trans_a ? s.M : s.K, ldb = s.trans_b ? s.K : s.N;
    double rate[2];
    for (int k = 0; k < 2; ++k) {
      const Products products{k == 0 ? kernels : GemmKernels::openblas, Precision::fp32};
      const double t = best_seconds(rounds, [&] {
        if (s.pieces)  // the layer's own pieces: O = M, I = N, R = K
          for (int piece = 0; piece < linear_param_pieces(s.N, s.M); ++piece)
            level.linear_backward_params(C.data(), row_sums.data(), A.data(), B.data(), s.K,
                                         s.N, s.M, piece, products, nullptr);
        else
          gemm(s.trans_a, s.trans_b, s.M, s.N, s.K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f,
               C.data(), s.N, products);
      });
      rate[k] = 2.0 * s.M * s.N * s.K / t * 1e-9;
    }
    std::printf("  %-24s %5d x %3d x %4d  %6.1f | %6.1f\n", s.what, s.M, s.N, s.K, rate[0],
                rate[1]);
  }
}

template <typename Level>
void time_attention(Level level, int rounds) {
  const int B = 128, D = 64, H = 4, Dh = D / H;
  std::printf("attention core, us a batch of %d (width %d, %d heads): forward | backward\n", B,
              D, H);
  const std::vector<float> additive_v = random_floats(size_t(H) * Dh, 5, 0.5f);
  for (AttentionForm form :
       {AttentionForm::scaled_dot, AttentionForm::lsa, AttentionForm::cosine,
        AttentionForm::additive}) {
    for (int T : {14, 16, 50, 64}) {
      const auto qkv = random_floats(size_t(B) * T * 3 * D, 3),
                 dout = random_floats(size_t(B) * T * D, 4);
      std::vector<float> out(size_t(B) * T * D), att(size_t(B) * H * T * T), dqkv(qkv.size()),
          scratch(level.scratch_floats(T, Dh)), log_scale(H, 0.5f), dlog_scale(H),
          per_pair(level.score_grad_floats(B, H, Dh));
      std::vector<uint8_t> mask(att.size());
      std::vector<float> dadditive_v(additive_v.size());
      const AttentionScore score{form, additive_v.data(), log_scale.data()};
      const AttentionScoreGrad dscore{dadditive_v.data(), dlog_scale.data(), per_pair.data()};
      const double forward = best_seconds(rounds, [&] {
        level.forward(out.data(), att.data(), mask.data(), qkv.data(), B, T, D, H, score, 0.0f, 0,
                      scratch.data(), 1, 0);
      });
      const double backward = best_seconds(rounds, [&] {
        level.backward(dqkv.data(), dscore, dout.data(), qkv.data(), att.data(), mask.data(), B,
                       T, D, H, score, 0.0f, scratch.data(), 1);
      });
      const char* name = form == AttentionForm::lsa        ? "lsa"
                         : form == AttentionForm::cosine   ? "cosine"
                         : form == AttentionForm::additive ? "additive"
                                                           : "scaled_dot";
      std::printf("  %-10s %2d tokens  %8.1f | %8.1f\n", name, T, forward * 1e6,
                  backward * 1e6);
    }
  }
}

template <typename Level>
void time_gelu(Level level, int rounds) {
  const int n = 65536;  // in L2, as a chunk's MLP rows are
  const auto x0 = random_floats(n, 5, 2.0f);
  std::vector<float> x(n), out(n);
  std::printf("GELU with its slope, ns an element, by the length of a call:\n");
  for (int row : {16, 128, 4096}) {
    const double t = best_seconds(rounds, [&] {
      std::copy(x0.begin(), x0.end(), x.begin());
      for (int i = 0; i < n; i += row) level.gelu(out.data() + i, x.data() + i, row);
    });
    std::printf("  %5d  %6.3f\n", row, t / n * 1e9);
  }
}

// LayerNorm at width 64 over one chunk's rows (8 images: 14 kept tokens in the default
// config's training, 49 in its evaluation), as a block calls it; the input gradient adds
// into the residual's gradient.
template <typename Level>
void time_layernorm(Level level, int rounds) {
  const int D = 64;
  std::printf("LayerNorm at width %d, ns a row (forward, input gradient), by the rows of a call:\n",
              D);
  for (int rows : {112, 392}) {
    const auto x = random_floats(size_t(rows) * D, 6, 2.0f);
    const auto dy = random_floats(size_t(rows) * D, 7);
    const auto w = random_floats(D, 8), b = random_floats(D, 9);
    std::vector<float> y(size_t(rows) * D), dx(size_t(rows) * D), mean(rows), rstd(rows);
    const double forward = best_seconds(rounds, [&] {
      level.layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                              rows, D);
    });
    const double backward = best_seconds(rounds, [&] {
      level.layernorm_backward_input(dx.data(), dy.data(), x.data(), w.data(), mean.data(),
                                     rstd.data(), rows, D, dy.data());
    });
    std::printf("  %5d  %6.2f  %6.2f\n", rows, forward / rows * 1e9, backward / rows * 1e9);
  }
}

// One level's functions, for the templates above.
#define MINIVIT_PARTS_OF(name, level)                                           \
  struct name {                                                                 \
    decltype(&level::attention_forward) forward = &level::attention_forward;   \
    decltype(&level::attention_backward) backward = &level::attention_backward; \
    decltype(&level::attention_scratch_floats) scratch_floats =                 \
        &level::attention_scratch_floats;                                       \
    decltype(&level::attention_score_grad_floats) score_grad_floats =           \
        &level::attention_score_grad_floats;                                    \
    decltype(&level::gelu_and_slope) gelu = &level::gelu_and_slope;             \
    decltype(&level::layernorm_forward) layernorm_forward = &level::layernorm_forward; \
    decltype(&level::layernorm_backward_input) layernorm_backward_input =       \
        &level::layernorm_backward_input;                                       \
    decltype(&level::linear_backward_params) linear_backward_params =           \
        &level::linear_backward_params;                                         \
  };
MINIVIT_PARTS_OF(X86_64Parts, isa_x86_64)
MINIVIT_PARTS_OF(Avx2Parts, isa_avx2)
MINIVIT_PARTS_OF(Avx512Parts, isa_avx512)
#undef MINIVIT_PARTS_OF

template <typename Level>
void time_parts(Level level, GemmKernels kernels, int rounds, const std::string& only) {
  if (only.empty() || only == "products") time_products(level, kernels, rounds);
  if (only.empty() || only == "attention") time_attention(level, rounds);
  if (only.empty() || only == "gelu") time_gelu(level, rounds);
  if (only.empty() || only == "layernorm") time_layernorm(level, rounds);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Time minivit's products, attention core, GELU and LayerNorm alone, on one thread.");
  const Isa best = best_isa();
  std::string isa = best == Isa::avx512 ? "avx512" : best == Isa::avx2 ? "avx2" : "x86_64";
  int rounds = 40;
  std::string only;
  app.add_option("--isa", isa,
                 "Instruction-set level: x86_64, avx2 or avx512 (default: the best here)")
      ->check(CLI::IsMember({"x86_64", "avx2", "avx512"}));
  app.add_option("--rounds", rounds, "Rounds of at least 8 ms; the best is kept (default 40)")
      ->check(CLI::PositiveNumber);
  app.add_option("--only", only,
                 "Time one part: products, attention, gelu or layernorm (default: all four), "
                 "as for a profile of that part alone")
      ->check(CLI::IsMember({"products", "attention", "gelu", "layernorm"}));
  CLI11_PARSE(app, argc, argv);
  const Isa level = isa == "avx512" ? Isa::avx512 : isa == "avx2" ? Isa::avx2 : Isa::x86_64;
  if (!cpu_runs(level)) {
    std::fprintf(stderr, "parts-bench: this CPU does not run %s\n", isa.c_str());
    return 1;
  }
  set_num_threads(1);  // as the trainer sets it: OpenBLAS on one thread, denormals flushed
  std::printf("parts-bench: %s, one thread, best of %d rounds\n", isa.c_str(), rounds);
  if (level == Isa::avx512)
    time_parts(Avx512Parts{}, GemmKernels::avx512, rounds, only);
  else if (level == Isa::avx2)
    time_parts(Avx2Parts{}, GemmKernels::avx2, rounds, only);
  else
    time_parts(X86_64Parts{}, GemmKernels::openblas, rounds, only);
}
