#include "minivit/train/benchmark.h"

#include <algorithm>
#include <chrono>

#include "minivit/core/rng.h"
#include "minivit/data/batcher.h"
#include "minivit/data/data.h"
#include "minivit/kernels/gemm.h"
#include "minivit/kernels/threads.h"
#include "minivit/model/train_step.h"
#include "minivit/nn/cross_entropy.h"
#include "minivit/train/evaluate.h"
#include "minivit/train/splits.h"

namespace minivit {

using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// GFLOP/s of one product (M, K) x (K, N) on `products` and the pool's threads, over half a
// second.
static double measure_gemm_gflops(int M, int N, int K, Products products) {
  std::vector<float> A(size_t(M) * K), B(size_t(N) * K), C(size_t(M) * N);
  for (size_t i = 0; i < A.size(); ++i) A[i] = rng_uniform(1, i) - 0.5f;
  for (size_t i = 0; i < B.size(); ++i) B[i] = rng_uniform(2, i) - 0.5f;
  // One untimed product first, to warm the caches and the pool.
  gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C.data(), N, products);
  int reps = 0;
  const auto t0 = Clock::now();
  do {
    gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C.data(), N, products);
    ++reps;
  } while (seconds_since(t0) < 0.5);
  return 2.0 * M * N * K * reps / seconds_since(t0) / 1e9;
}


static constexpr int kLatencyImageSet = 64;  // distinct synthetic images cycled through
static constexpr int kLatencyWarmup = 100;   // untimed forwards first

static Latency measure_latency(const ViT& model, const Compute& compute, int n) {
  const ModelConfig& mc = model.config;
  const int64_t image_len = int64_t(mc.channels) * mc.image_size * mc.image_size;
  std::vector<float> images(size_t(kLatencyImageSet * image_len));
  for (size_t i = 0; i < images.size(); ++i) images[i] = float(rng_normal(5, i));
  Activations acts(mc, 1, ActivationsFor::evaluation);
  acts.compute = compute;
  const ForwardWeightsHeld held(model, acts);  // as a loaded model's predictions do
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



// Seconds of opt.steps training steps after opt.warmup untimed ones; `profile`, if given,
// splits the timed ones into their phases.
static double time_train_steps(BenchSetup& s, const BenchSteps& opt,
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
Throughput measure_throughput(BenchSetup& s, const BenchSteps& opt) {
  Throughput t;
  StepProfile profile;
  t.train_s = time_train_steps(s, opt, &profile);
  t.attention_share = profile.attention_seconds / t.train_s;
  t.clear_share = profile.clear_seconds / t.train_s;
  t.forward_share = profile.forward_seconds / t.train_s;
  t.backward_share = profile.backward_seconds / t.train_s;
  t.update_share = profile.update_seconds / t.train_s;

  {
    const ForwardWeightsHeld held(s.model, s.eval_acts);  // as one evaluation pass holds them
    for (int i = 0; i < opt.warmup; ++i) s.eval_batch();
    const auto t0 = Clock::now();
    for (int i = 0; i < opt.steps; ++i) s.eval_batch();
    t.eval_s = seconds_since(t0);
  }

  t.sgemm = s.largest_product_gflops({s.acts.compute.kernels, Precision::fp32});
  t.train_ips = double(opt.steps) * s.B / t.train_s;
  t.eval_ips = double(opt.steps) * s.B / t.eval_s;
  t.train_gflops = t.train_ips * vit_train_flops(s.mc) / 1e9;
  t.eval_gflops = t.eval_ips * vit_forward_flops(s.mc) / 1e9;
  t.train_percent = 100 * t.train_gflops / t.sgemm;
  t.eval_percent = 100 * t.eval_gflops / t.sgemm;
  return t;
}


EveryPatchRate measure_every_patch_rate(BenchSetup& s, const BenchSteps& opt,
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

static BenchRound measure_round(BenchSetup& s, const BenchSteps& opt, RoundExtras extras) {
  BenchRound r;
  r.rates = measure_throughput(s, opt);
  if (extras.every_patch) r.every_patch = measure_every_patch_rate(s, opt, r.rates.sgemm);
  if (extras.openblas)
    r.openblas_sgemm = s.largest_product_gflops({GemmKernels::openblas, Precision::fp32});
  if (extras.bf16)
    r.bf16_gemm = s.largest_product_gflops({s.acts.compute.kernels, Precision::bf16});
  return r;
}

// The best of each rate over the rounds, as BenchRounds says.
static BenchRound best_of(const std::vector<BenchRound>& each) {
  auto best = [&](auto rate) {
    return *std::max_element(each.begin(), each.end(),
                             [&](const BenchRound& a, const BenchRound& b) {
                               return rate(a) < rate(b);
                             });
  };
  BenchRound r = best([](const BenchRound& x) { return x.rates.train_ips; });
  const Throughput& eval = best([](const BenchRound& x) { return x.rates.eval_ips; }).rates;
  r.rates.eval_s = eval.eval_s, r.rates.eval_ips = eval.eval_ips;
  r.rates.eval_gflops = eval.eval_gflops;
  r.rates.sgemm = best([](const BenchRound& x) { return x.rates.sgemm; }).rates.sgemm;
  r.rates.train_percent = 100 * r.rates.train_gflops / r.rates.sgemm;
  r.rates.eval_percent = 100 * r.rates.eval_gflops / r.rates.sgemm;
  r.every_patch = best([](const BenchRound& x) { return x.every_patch.ips; }).every_patch;
  r.every_patch.percent = 100 * r.every_patch.gflops / r.rates.sgemm;
  r.openblas_sgemm = best([](const BenchRound& x) { return x.openblas_sgemm; }).openblas_sgemm;
  r.bf16_gemm = best([](const BenchRound& x) { return x.bf16_gemm; }).bf16_gemm;
  return r;
}

BenchRounds measure_rounds(BenchSetup& s, const BenchSteps& opt, int rounds,
                           RoundExtras extras) {
  BenchRounds result;
  for (int i = 0; i < rounds; ++i) result.each.push_back(measure_round(s, opt, extras));
  result.best = best_of(result.each);
  return result;
}

// The passes' Compute holds the thread count, and the caller's pool is left as it was.
Latency measure_latency_on_threads(const ViT& model, const Compute& compute, int images,
                                   int threads) {
  Compute on_threads = compute;
  on_threads.threads = threads;
  return measure_latency(model, on_threads, images);
}

BenchSetup::BenchSetup(const Config& c)
    : config(c), mc(c.model), B(c.train.batch_size), K(c.model.num_classes),
      image_len(int64_t(mc.channels) * mc.image_size * mc.image_size), model(mc),
      optimizer(c.optim, model.num_params), acts(mc, B, ActivationsFor::training),
      eval_acts(mc, B, ActivationsFor::evaluation),
      images(size_t(B * image_len)), targets(size_t(B) * K), labels(static_cast<size_t>(B)) {
  model.init(c.train.seed);
  acts.block_products = c.train.precision;
  for (size_t i = 0; i < images.size(); ++i) images[i] = float(rng_normal(3, i));
  for (int b = 0; b < B; ++b) labels[size_t(b)] = int32_t(rng_u64(4, uint64_t(b)) % uint64_t(K));
  make_targets(targets.data(), labels.data(), B, K, c.optim.label_smoothing);
}

double BenchSetup::largest_product_gflops(Products products) const {
  return measure_gemm_gflops(B * mc.tokens(), 3 * mc.dim, mc.dim, products);
}

void BenchSetup::train_steps(int n, int64_t first) {
  for (int s = 0; s < n; ++s)
    train_step(model, acts, optimizer, images.data(), targets.data(), labels.data(), B,
               config.optim.lr * 0.01f, config.optim.clip_grad_norm,
               rng_key(config.train.seed, kRngDropout, uint64_t(first + s)));
}

void BenchSetup::train_on_every_patch(bool every_patch) {
  model.config.patch_drop = every_patch ? 0.0f : mc.patch_drop;
}

void BenchSetup::eval_batch() {
  const int chunk = eval_batch_size(eval_acts.max_batch);  // for the pool's threads now
  for (int start = 0; start < B; start += chunk)
    vit_forward(model, eval_acts, images.data() + start * image_len, std::min(chunk, B - start),
                false, 0);
}

std::vector<int> sweep_thread_counts() {
  const int cores = max_work_blocks();
  std::vector<int> counts;
  for (int t = 1; t < cores; t *= 2) counts.push_back(t);
  counts.push_back(cores);
  return counts;
}

LoaderRate measure_loader_rate(const Config& config, int batches) {
  const DataSplits data = load_data(config.data, config.model);
  check_data_fits_model(data.train, config.model, config.data.path + " (train split)");
  std::vector<int64_t> indices = images_of_split(data, Split::train, config).indices;
  LoaderRate rate;
  rate.train_images = int64_t(indices.size());
  const int64_t steps = steps_per_epoch(rate.train_images, config.train.batch_size);
  TrainBatches make(data.train, std::move(indices), config, steps);
  Batch batch(config.train.batch_size, make.image_len(), make.classes());
  make.make(0, batch);  // the epoch's order is drawn here
  const auto start = std::chrono::steady_clock::now();
  for (int step = 1; step <= batches; ++step) make.make(step, batch);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  rate.ips = double(batches) * config.train.batch_size / seconds;
  rate.ms_per_batch = 1e3 * seconds / batches;
  return rate;
}

}  // namespace minivit
