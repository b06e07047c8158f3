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
static double measure_sgemm_gflops(int M, int N, int K, GemmKernels kernels) {
  const Products fp32{kernels, Precision::fp32};
  std::vector<float> A(size_t(M) * K), B(size_t(N) * K), C(size_t(M) * N);
  for (size_t i = 0; i < A.size(); ++i) A[i] = rng_uniform(1, i) - 0.5f;
  for (size_t i = 0; i < B.size(); ++i) B[i] = rng_uniform(2, i) - 0.5f;
  gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C.data(), N, fp32);  // warm-up
  int reps = 0;
  const auto t0 = Clock::now();
  do {
    gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C.data(), N, fp32);
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

static Latency measure_latency(const ViT& model, const Compute& compute, int n) {
  const ModelConfig& mc = model.config;
  const int64_t image_len = int64_t(mc.channels) * mc.image_size * mc.image_size;
  std::vector<float> images(size_t(kLatencyImageSet * image_len));
  for (size_t i = 0; i < images.size(); ++i) images[i] = float(rng_normal(5, i));
  Activations acts(mc, 1, false);
  acts.compute = compute;
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

// The model, its run state and one synthetic batch at a config's shapes.
struct BenchSetup {
  Config config;
  ModelConfig mc;
  int B, K;
  int64_t image_len;
  ViT model;
  Optimizer optimizer;
  Activations acts;
  std::vector<float> images, targets;  // (B, C*H*W), (B, K)
  std::vector<int32_t> labels;         // (B)

  explicit BenchSetup(const Config& c)
      : config(c), mc(c.model), B(c.train.batch_size), K(c.model.num_classes),
        image_len(int64_t(mc.channels) * mc.image_size * mc.image_size), model(mc),
        optimizer(c.optim, model.num_params), acts(mc, B, true),
        images(size_t(B * image_len)), targets(size_t(B) * K), labels(static_cast<size_t>(B)) {
    model.init(c.train.seed);
    acts.block_products = c.train.precision;
    for (size_t i = 0; i < images.size(); ++i) images[i] = float(rng_normal(3, i));
    for (int b = 0; b < B; ++b) labels[size_t(b)] = int32_t(rng_u64(4, uint64_t(b)) % uint64_t(K));
    make_targets(targets.data(), labels.data(), B, K, c.optim.label_smoothing);
  }

  void train_steps(int n, int64_t first) {
    for (int s = 0; s < n; ++s)
      train_step(model, acts, optimizer, images.data(), targets.data(), labels.data(), B,
                 config.optim.lr * 0.01f, config.optim.clip_grad_norm,
                 rng_key(config.train.seed, kRngDropout, uint64_t(first + s)));
  }

  // The steps of train.unmasked_epochs: every patch through the blocks, switched as the
  // trainer switches (the activations hold every token either way).
  void train_on_every_patch(bool every_patch) {
    model.config.patch_drop = every_patch ? 0.0f : mc.patch_drop;
  }

  // An evaluation batch goes through the model in the chunks evaluate() uses.
  void eval_batch() {
    const int chunk = eval_batch_size(acts.max_batch);
    for (int start = 0; start < B; start += chunk)
      vit_forward(model, acts, images.data() + start * image_len, std::min(chunk, B - start),
                  false, 0);
  }
};

struct Throughput {
  double train_s = 0.0, eval_s = 0.0;  // for opt.steps steps and batches
  double train_ips = 0.0, eval_ips = 0.0, train_gflops = 0.0, eval_gflops = 0.0;
  double sgemm = 0.0;  // GFLOP/s on the model's largest product, same threads
  double train_percent = 0.0, eval_percent = 0.0;  // of the sgemm rate
  double attention_share = 0.0;  // of the training time
  // The step's phases, as shares of the training time (train_step.h); clearing and update
  // run on one thread, so their share is the step's serial part.
  double clear_share = 0.0, forward_share = 0.0, backward_share = 0.0, update_share = 0.0;
  double serial_share() const { return clear_share + update_share; }
};

// Seconds of opt.steps training steps after opt.warmup untimed ones; `profile`, if given,
// splits the timed ones into their phases.
static double time_train_steps(BenchSetup& s, const BenchOptions& opt,
                               StepProfile* profile = nullptr) {
  s.train_steps(opt.warmup, 0);
  s.acts.profile = profile;
  const auto t0 = Clock::now();
  s.train_steps(opt.steps, opt.warmup);
  const double seconds = seconds_since(t0);
  s.acts.profile = nullptr;
  return seconds;
}

// Training steps and evaluation batches on the thread pool as it is set, each after
// opt.warmup untimed ones, and the sgemm rate on the same threads.
static Throughput measure_throughput(BenchSetup& s, const BenchOptions& opt) {
  Throughput t;
  StepProfile profile;
  t.train_s = time_train_steps(s, opt, &profile);
  t.attention_share = profile.attention_seconds / t.train_s;
  t.clear_share = profile.clear_seconds / t.train_s;
  t.forward_share = profile.forward_seconds / t.train_s;
  t.backward_share = profile.backward_seconds / t.train_s;
  t.update_share = profile.update_seconds / t.train_s;

  for (int i = 0; i < opt.warmup; ++i) s.eval_batch();
  const auto t0 = Clock::now();
  for (int i = 0; i < opt.steps; ++i) s.eval_batch();
  t.eval_s = seconds_since(t0);

  t.sgemm = measure_sgemm_gflops(s.B * s.mc.tokens(), 3 * s.mc.dim, s.mc.dim, s.acts.compute.kernels);
  t.train_ips = double(opt.steps) * s.B / t.train_s;
  t.eval_ips = double(opt.steps) * s.B / t.eval_s;
  t.train_gflops = t.train_ips * vit_train_flops(s.mc) / 1e9;
  t.eval_gflops = t.eval_ips * vit_forward_flops(s.mc) / 1e9;
  t.train_percent = 100 * t.train_gflops / t.sgemm;
  t.eval_percent = 100 * t.eval_gflops / t.sgemm;
  return t;
}

// With train.unmasked_epochs the run ends on steps over every patch, several times dearer
// than the dropped-patch ones measure_throughput() times: their rate on its own, so the
// length of the whole run can be judged before it starts.
struct EveryPatchRate {
  double ips = 0.0, gflops = 0.0, percent = 0.0, ms_per_step = 0.0;
};

static EveryPatchRate measure_every_patch_rate(BenchSetup& s, const BenchOptions& opt,
                                               double sgemm_gflops) {
  s.train_on_every_patch(true);
  const double seconds = time_train_steps(s, opt);
  EveryPatchRate r;
  r.ips = double(opt.steps) * s.B / seconds;
  r.gflops = r.ips * vit_train_flops(s.model.config) / 1e9;  // the work of every patch
  s.train_on_every_patch(false);
  r.percent = 100 * r.gflops / sgemm_gflops;
  r.ms_per_step = 1e3 * seconds / opt.steps;
  return r;
}

// Latency on one thread: the passes' Compute says so, and the caller's pool is left as it was.
static Latency measure_latency_on_one_thread(const ViT& model, const Compute& compute,
                                             int images) {
  Compute one_thread = compute;
  one_thread.threads = 1;
  return measure_latency(model, one_thread, images);
}

// The line on stderr that says what is measured; `threads` as bench runs them.
static void announce(const BenchSetup& s, const BenchOptions& opt, const std::string& threads) {
  // With patch dropout a training step's blocks see fewer tokens than evaluation's.
  const std::string tokens =
      std::to_string(s.mc.tokens()) +
      (s.mc.train_tokens() != s.mc.tokens()
           ? " tokens (" + std::to_string(s.mc.train_tokens()) + " in training: model.patch_drop)"
           : std::string(" tokens"));
  std::fprintf(stderr,
               "bench: %s, batch %d, %s, %s attention, %s, gemm kernels %s, %s products in "
               "training\n",
               opt.config_path.c_str(), s.B, tokens.c_str(),
               std::string(config_name(s.mc.attention)).c_str(),
               threads.c_str(), s.acts.compute.kernels_name().c_str(),
               std::string(config_name(s.acts.compute.effective_precision(s.config.train.precision))).c_str());
  if (const std::string note = Compute::environment_note(); !note.empty())
    std::fprintf(stderr, "%s\n", note.c_str());
  if (const std::string advice = blas_kernel_advice(s.acts.compute); !advice.empty())
    std::fprintf(stderr, "%s\n", advice.c_str());
  if (const std::string note = s.acts.compute.precision_note(s.config.train.precision);
      !note.empty())
    std::fprintf(stderr, "%s\n", note.c_str());
}

// 1, 2, 4, ... threads up to the machine's cores, and the core count itself.
static std::vector<int> sweep_thread_counts() {
  const int cores = max_work_blocks();
  std::vector<int> counts;
  for (int t = 1; t < cores; t *= 2) counts.push_back(t);
  counts.push_back(cores);
  return counts;
}

// --threads-sweep: the same measurement at each thread count, as a table with the scaling
// over one thread beside the sgemm rate's, so a machine's scaling shows at a glance.
static int run_threads_sweep(BenchSetup& s, const BenchOptions& opt) {
  announce(s, opt, "threads swept");
  std::printf("threads  train img/s  eval img/s  sgemm GFLOP/s  train %%sgemm  eval %%sgemm  "
              "train x1  eval x1  sgemm x1  serial %%\n");
  nlohmann::json rows = nlohmann::json::array();
  Throughput one;
  for (int threads : sweep_thread_counts()) {
    set_num_threads(threads);
    const Throughput t = measure_throughput(s, opt);
    if (threads == 1) one = t;
    std::printf("%7d  %11.1f  %10.1f  %13.1f  %11.1f%%  %10.1f%%  %8.2f  %7.2f  %8.2f  %7.2f%%\n",
                threads, t.train_ips, t.eval_ips, t.sgemm, t.train_percent, t.eval_percent,
                t.train_ips / one.train_ips, t.eval_ips / one.eval_ips, t.sgemm / one.sgemm,
                100 * t.serial_share());
    std::fflush(stdout);
    rows.push_back({{"threads", threads},
                    {"train_img_per_s", t.train_ips},
                    {"eval_img_per_s", t.eval_ips},
                    {"sgemm_gflops", t.sgemm},
                    {"train_percent_of_sgemm", t.train_percent},
                    {"eval_percent_of_sgemm", t.eval_percent},
                    {"serial_time_share", t.serial_share()}});
  }
  const int cores = max_work_blocks();
  Latency latency;
  if (opt.latency_images > 0) {
    latency = measure_latency_on_one_thread(s.model, s.acts.compute, opt.latency_images);
    std::printf("latency  batch 1, 1 thread: median %.3f ms, p99 %.3f ms over %d images (forward only)\n",
                latency.median_ms, latency.p99_ms, opt.latency_images);
  }
  std::printf("gemm kernels %s, %d cores, batch %d\n", s.acts.compute.kernels_name().c_str(), cores, s.B);
  if (!opt.json_path.empty()) {
    nlohmann::json j = {{"attention", config_name(s.mc.attention)}, {"threads_sweep", rows},
                        {"cores", cores}, {"batch_size", s.B}, {"tokens", s.mc.tokens()},
                        {"steps", opt.steps}, {"gemm_kernels", s.acts.compute.kernels_name()},
                        {"precision", config_name(s.acts.compute.effective_precision(s.config.train.precision))},
                        {"blas_kernels", blas_kernel_name()}, {"config", opt.config_path},
                        {"latency_images", opt.latency_images}};
    if (opt.latency_images > 0) {
      j["latency_median_ms"] = latency.median_ms;
      j["latency_p99_ms"] = latency.p99_ms;
    }
    write_file_atomic(opt.json_path, j.dump(2) + "\n");
  }
  return 0;
}

int run_bench(const BenchOptions& opt) {
  Config config = load_config(opt.config_path, opt.sets);
  if (opt.steps < 1) throw Error("--steps: must be at least 1, got " + std::to_string(opt.steps));
  if (opt.latency_images < 0)
    throw Error("--latency-images: must be 0 (skip the latency measurement) or more, got " +
                std::to_string(opt.latency_images));
  BenchSetup s(config);
  if (opt.threads_sweep) return run_threads_sweep(s, opt);

  const int threads = set_num_threads(config.train.threads);
  const ModelConfig& mc = s.mc;
  const int B = s.B;
  announce(s, opt, std::to_string(threads) + " threads");
  const Throughput t = measure_throughput(s, opt);
  // The config check admits train.unmasked_epochs only with model.patch_drop.
  const bool ends_on_every_patch = config.train.unmasked_epochs > 0;
  EveryPatchRate tail;
  if (ends_on_every_patch) tail = measure_every_patch_rate(s, opt, t.sgemm);
  Latency latency;
  if (opt.latency_images > 0)
    latency = measure_latency_on_one_thread(s.model, s.acts.compute, opt.latency_images);

  // OpenBLAS on the same product, for scale, when minivit's own kernels are in use.
  const GemmKernels in_use = s.acts.compute.kernels;
  double openblas_sgemm = t.sgemm;
  if (in_use != GemmKernels::openblas)
    openblas_sgemm = measure_sgemm_gflops(B * mc.tokens(), 3 * mc.dim, mc.dim, GemmKernels::openblas);
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  const double peak_rss_mb = usage.ru_maxrss / 1024.0;

  std::printf("train  %8.1f img/s  %6.1f GFLOP/s  (%4.1f%% of sgemm)  %.2f ms/step\n", t.train_ips,
              t.train_gflops, t.train_percent, 1e3 * t.train_s / opt.steps);
  if (ends_on_every_patch)
    std::printf("train  %8.1f img/s  %6.1f GFLOP/s  (%4.1f%% of sgemm)  %.2f ms/step on every "
                "patch (the last %d epochs: train.unmasked_epochs)\n",
                tail.ips, tail.gflops, tail.percent, tail.ms_per_step,
                config.train.unmasked_epochs);
  std::printf("eval   %8.1f img/s  %6.1f GFLOP/s  (%4.1f%% of sgemm)  %.2f ms/batch\n", t.eval_ips,
              t.eval_gflops, t.eval_percent, 1e3 * t.eval_s / opt.steps);
  if (opt.latency_images > 0)
    std::printf("latency  batch 1, 1 thread: median %.3f ms, p99 %.3f ms over %d images (forward only)\n",
                latency.median_ms, latency.p99_ms, opt.latency_images);
  std::printf("sgemm  %6.1f GFLOP/s at (%d x %d x %d); %.1f MFLOP/image train, %.1f forward\n",
              t.sgemm, B * mc.tokens(), 3 * mc.dim, mc.dim, vit_train_flops(mc) / 1e6,
              vit_forward_flops(mc) / 1e6);
  if (in_use != GemmKernels::openblas)
    std::printf("sgemm  %6.1f GFLOP/s through OpenBLAS (%s kernels) on the same product\n",
                openblas_sgemm, blas_kernel_name());
  std::printf("attention core: %.1f%% of training time, %.1f%% of the FLOPs\n",
              100 * t.attention_share, 100 * vit_attention_flop_share(mc));
  std::printf("step phases: forward %.1f%%, backward %.1f%%, update %.2f%%, clearing gradients "
              "%.2f%% (the last two on one thread)\n",
              100 * t.forward_share, 100 * t.backward_share, 100 * t.update_share,
              100 * t.clear_share);
  std::printf("threads %d, gemm kernels %s, peak RSS %.0f MB, activations %.0f MB\n", threads,
              s.acts.compute.kernels_name().c_str(), peak_rss_mb, s.acts.bytes() / 1048576.0);
  if (!opt.json_path.empty()) {
    nlohmann::json j = {{"attention", config_name(mc.attention)},
                        {"train_img_per_s", t.train_ips},
                        {"eval_img_per_s", t.eval_ips},
                        {"gflops", t.train_gflops},
                        {"eval_gflops", t.eval_gflops},
                        {"sgemm_gflops", t.sgemm},
                        {"openblas_sgemm_gflops", openblas_sgemm},
                        {"train_percent_of_sgemm", t.train_percent},
                        {"eval_percent_of_sgemm", t.eval_percent},
                        {"train_mflop_per_image", vit_train_flops(mc) / 1e6},
                        {"forward_mflop_per_image", vit_forward_flops(mc) / 1e6},
                        {"attention_time_share", t.attention_share},
                        {"attention_flop_share", vit_attention_flop_share(mc)},
                        {"phase_time_shares",
                         {{"clear_grads", t.clear_share},
                          {"forward", t.forward_share},
                          {"backward", t.backward_share},
                          {"update", t.update_share}}},
                        {"threads", threads},
                        {"batch_size", B},
                        {"tokens", mc.tokens()},
                        {"steps", opt.steps},
                        {"gemm_kernels", s.acts.compute.kernels_name()},
                        {"precision", config_name(s.acts.compute.effective_precision(s.config.train.precision))},
                        {"blas_kernels", blas_kernel_name()},
                        {"peak_rss_mb", peak_rss_mb},
                        {"config", opt.config_path}};
    if (ends_on_every_patch) {  // the train.unmasked_epochs steps
      j["train_every_patch_img_per_s"] = tail.ips;
      j["train_every_patch_percent_of_sgemm"] = tail.percent;
    }
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
