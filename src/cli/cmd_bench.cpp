// `minivit bench`: training and evaluation throughput at a config's shapes, on synthetic
// data (no dataset needed), with the FLOP rate against the sgemm rate measured in the
// same run, so figures from different machines can be compared as ratios; and the latency
// of one image on one thread, the figure an embedded user waits for.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "minivit/cli/commands.h"
#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/core/progress.h"
#include "minivit/core/rng.h"
#include "minivit/formats/config_file.h"
#include "minivit/kernels/gemm.h"
#include "minivit/kernels/runtime.h"
#include "minivit/kernels/threads.h"
#include "minivit/model/optimizer.h"
#include "minivit/model/train_step.h"
#include "minivit/nn/cross_entropy.h"
#include "minivit/train/evaluate.h"

namespace minivit {

using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// sgemm rate of this machine with this thread count, on the model's largest product
// (the batch folded into rows times the qkv projection).
static double measure_sgemm_gflops(int M, int N, int K) {
  std::vector<float> A(size_t(M) * K), B(size_t(N) * K), C(size_t(M) * N);
  for (size_t i = 0; i < A.size(); ++i) A[i] = rng_uniform(1, i) - 0.5f;
  for (size_t i = 0; i < B.size(); ++i) B[i] = rng_uniform(2, i) - 0.5f;
  gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C.data(), N);  // warm-up
  int reps = 0;
  const auto t0 = Clock::now();
  do {
    gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C.data(), N);
    ++reps;
  } while (seconds_since(t0) < 0.5);
  return 2.0 * M * N * K * reps / seconds_since(t0) / 1e9;
}

// Single-image latency, as an embedded user meets it: batch 1 on one thread, each forward
// timed on its own. The images cycle through a set of different ones, so the figure is not
// that of one input held in cache.
struct Latency {
  double median_ms = 0.0, p99_ms = 0.0;
};

static constexpr int kLatencyImageSet = 64;  // distinct synthetic images cycled through
static constexpr int kLatencyWarmup = 100;   // untimed forwards first

static Latency measure_latency(const ViT& model, int n) {
  const ModelConfig& mc = model.config;
  const int64_t image_len = int64_t(mc.channels) * mc.image_size * mc.image_size;
  std::vector<float> images(size_t(kLatencyImageSet * image_len));
  for (size_t i = 0; i < images.size(); ++i) images[i] = float(rng_normal(5, i));
  Activations acts(mc, 1, false);
  auto forward = [&](int i) {
    vit_forward(model, acts, images.data() + (i % kLatencyImageSet) * image_len, 1, false, 0);
  };
  for (int i = 0; i < kLatencyWarmup; ++i) forward(i);
  std::vector<double> ms(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    forward(i);
    ms[size_t(i)] = 1e3 * seconds_since(t0);
  }
  std::sort(ms.begin(), ms.end());
  Latency result;
  result.median_ms = n % 2 ? ms[size_t(n / 2)] : 0.5 * (ms[size_t(n / 2 - 1)] + ms[size_t(n / 2)]);
  // The 99th percentile by nearest rank: the ceil(0.99 n)-th smallest time.
  result.p99_ms = ms[size_t((99 * int64_t(n) + 99) / 100 - 1)];
  return result;
}

int run_bench(const BenchOptions& opt) {
  Config config = load_config(opt.config_path, opt.sets);
  if (opt.steps < 1) throw Error("--steps: must be at least 1, got " + std::to_string(opt.steps));
  if (opt.latency_images < 0)
    throw Error("--latency-images: must be 0 (skip the latency measurement) or more, got " +
                std::to_string(opt.latency_images));
  const int threads = set_num_threads(config.train.threads);
  const ModelConfig& mc = config.model;
  const int B = config.train.batch_size, K = mc.num_classes;
  const int64_t image_len = int64_t(mc.channels) * mc.image_size * mc.image_size;

  ViT model(mc);
  model.init(config.train.seed);
  Optimizer optimizer(config.optim, model.num_params);
  Activations acts(mc, B, true);
  std::vector<float> images(size_t(B * image_len)), targets(size_t(B) * K);
  std::vector<int32_t> labels(static_cast<size_t>(B));
  for (size_t i = 0; i < images.size(); ++i) images[i] = float(rng_normal(3, i));
  for (int b = 0; b < B; ++b) labels[size_t(b)] = int32_t(rng_u64(4, uint64_t(b)) % uint64_t(K));
  make_targets(targets.data(), labels.data(), B, K, config.optim.label_smoothing);

  auto train_steps = [&](int n, int64_t first) {
    for (int s = 0; s < n; ++s)
      train_step(model, acts, optimizer, images.data(), targets.data(), labels.data(), B,
                 config.optim.lr * 0.01f, config.optim.clip_grad_norm,
                 rng_key(config.train.seed, kRngDropout, uint64_t(first + s)));
  };
  std::fprintf(stderr, "bench: %s, batch %d, %d tokens, %s attention, %d threads, gemm kernels %s\n",
               opt.config_path.c_str(), B, mc.tokens(), std::string(config_name(mc.attention)).c_str(),
               threads, gemm_kernels_name().c_str());
  if (const std::string advice = blas_kernel_advice(); !advice.empty())
    std::fprintf(stderr, "%s\n", advice.c_str());
  train_steps(opt.warmup, 0);
  StepProfile profile;
  acts.profile = &profile;
  auto t0 = Clock::now();
  train_steps(opt.steps, opt.warmup);
  const double train_s = seconds_since(t0);
  const double attention_share = profile.attention_seconds / train_s;
  acts.profile = nullptr;

  // Evaluation batches go through the model in the chunks evaluate() uses.
  auto eval_batch = [&]() {
    for (int start = 0; start < B; start += kEvalChunk)
      vit_forward(model, acts, images.data() + start * image_len, std::min(kEvalChunk, B - start),
                  false, 0);
  };
  for (int s = 0; s < opt.warmup; ++s) eval_batch();
  t0 = Clock::now();
  for (int s = 0; s < opt.steps; ++s) eval_batch();
  const double eval_s = seconds_since(t0);

  // Latency on one thread, then the bench's thread count again for the sgemm rate.
  Latency latency;
  if (opt.latency_images > 0) {
    set_num_threads(1);
    try {
      latency = measure_latency(model, opt.latency_images);
    } catch (...) {
      set_num_threads(threads);
      throw;
    }
    set_num_threads(threads);
  }

  const double sgemm = measure_sgemm_gflops(B * mc.tokens(), 3 * mc.dim, mc.dim);
  // OpenBLAS on the same product, for scale, when minivit's own kernels are in use.
  const GemmKernels in_use = gemm_kernels();
  double openblas_sgemm = sgemm;
  if (in_use != GemmKernels::openblas) {
    set_gemm_kernels(GemmKernels::openblas);
    openblas_sgemm = measure_sgemm_gflops(B * mc.tokens(), 3 * mc.dim, mc.dim);
    set_gemm_kernels(in_use);
  }
  const double train_ips = double(opt.steps) * B / train_s;
  const double eval_ips = double(opt.steps) * B / eval_s;
  const double train_gflops = train_ips * vit_train_flops(mc) / 1e9;
  const double eval_gflops = eval_ips * vit_forward_flops(mc) / 1e9;
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  const double peak_rss_mb = usage.ru_maxrss / 1024.0;

  std::printf("train  %8.1f img/s  %6.1f GFLOP/s  (%4.1f%% of sgemm)  %.2f ms/step\n", train_ips,
              train_gflops, 100 * train_gflops / sgemm, 1e3 * train_s / opt.steps);
  std::printf("eval   %8.1f img/s  %6.1f GFLOP/s  (%4.1f%% of sgemm)  %.2f ms/batch\n", eval_ips,
              eval_gflops, 100 * eval_gflops / sgemm, 1e3 * eval_s / opt.steps);
  if (opt.latency_images > 0)
    std::printf("latency  batch 1, 1 thread: median %.3f ms, p99 %.3f ms over %d images (forward only)\n",
                latency.median_ms, latency.p99_ms, opt.latency_images);
  std::printf("sgemm  %6.1f GFLOP/s at (%d x %d x %d); %.1f MFLOP/image train, %.1f forward\n",
              sgemm, B * mc.tokens(), 3 * mc.dim, mc.dim, vit_train_flops(mc) / 1e6,
              vit_forward_flops(mc) / 1e6);
  if (in_use != GemmKernels::openblas)
    std::printf("sgemm  %6.1f GFLOP/s through OpenBLAS (%s kernels) on the same product\n",
                openblas_sgemm, blas_kernel_name());
  std::printf("attention core: %.1f%% of training time, %.1f%% of the FLOPs\n",
              100 * attention_share, 100 * vit_attention_flop_share(mc));
  std::printf("threads %d, gemm kernels %s, peak RSS %.0f MB, activations %.0f MB\n", threads,
              gemm_kernels_name().c_str(), peak_rss_mb, acts.bytes() / 1048576.0);
  if (!opt.json_path.empty()) {
    nlohmann::json j = {{"attention", config_name(mc.attention)},
                        {"train_img_per_s", train_ips},
                        {"eval_img_per_s", eval_ips},
                        {"gflops", train_gflops},
                        {"eval_gflops", eval_gflops},
                        {"sgemm_gflops", sgemm},
                        {"openblas_sgemm_gflops", openblas_sgemm},
                        {"train_percent_of_sgemm", 100 * train_gflops / sgemm},
                        {"eval_percent_of_sgemm", 100 * eval_gflops / sgemm},
                        {"train_mflop_per_image", vit_train_flops(mc) / 1e6},
                        {"forward_mflop_per_image", vit_forward_flops(mc) / 1e6},
                        {"attention_time_share", attention_share},
                        {"attention_flop_share", vit_attention_flop_share(mc)},
                        {"threads", threads},
                        {"batch_size", B},
                        {"tokens", mc.tokens()},
                        {"steps", opt.steps},
                        {"gemm_kernels", gemm_kernels_name()},
                        {"blas_kernels", blas_kernel_name()},
                        {"peak_rss_mb", peak_rss_mb},
                        {"config", opt.config_path}};
    j["latency_images"] = opt.latency_images;  // 0: not measured, and no latency figures
    if (opt.latency_images > 0) {
      j["latency_median_ms"] = latency.median_ms;
      j["latency_p99_ms"] = latency.p99_ms;
    }
    write_file_atomic(opt.json_path, j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace minivit
