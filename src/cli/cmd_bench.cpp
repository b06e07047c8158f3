// `minivit bench`: prints what train/benchmark.h measures at a config's shapes, and writes it
// as JSON.
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "minivit/cli/commands.h"
#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/formats/config_file.h"
#include "minivit/kernels/runtime.h"
#include "minivit/kernels/threads.h"
#include "minivit/train/benchmark.h"

namespace minivit {

// The line on stderr that says what is measured; `threads` as bench runs them.
static void announce(const BenchSetup& s, const BenchOptions& opt, const std::string& threads) {
  // With patch dropout a training step's blocks see fewer tokens than evaluation's.
  const std::string tokens =
      std::to_string(s.mc.tokens()) +
      (s.mc.train_tokens() != s.mc.tokens()
           ? " tokens (" + std::to_string(s.mc.train_tokens()) + " in training: model.patch_drop)"
           : std::string(" tokens"));
  std::fprintf(stderr,
               "bench: %s, batch %d, %s, %s attention, %s, gemm kernels %s, layers %s, %s "
               "products in training\n",
               opt.config_path.c_str(), s.B, tokens.c_str(),
               std::string(config_name(s.mc.attention)).c_str(),
               threads.c_str(), s.acts.compute.kernels_name().c_str(),
               isa_name(s.acts.compute.isa),
               std::string(config_name(s.acts.compute.effective_precision(s.config.train.precision))).c_str());
  if (const std::string note = Compute::environment_note(); !note.empty())
    std::fprintf(stderr, "%s\n", note.c_str());
  if (const std::string advice = blas_kernel_advice(s.acts.compute); !advice.empty())
    std::fprintf(stderr, "%s\n", advice.c_str());
  if (const std::string note = s.acts.compute.precision_note(s.config.train.precision);
      !note.empty())
    std::fprintf(stderr, "%s\n", note.c_str());
}

// The latency line: one image at a time, on --latency-threads threads.
static void print_latency(const BenchOptions& opt, const Latency& latency) {
  std::printf("latency  batch 1, %d thread%s: median %.3f ms, p99 %.3f ms over %d images "
              "(forward only)\n",
              opt.latency_threads, opt.latency_threads == 1 ? "" : "s", latency.median_ms,
              latency.p99_ms, opt.latency_images);
}

// --threads-sweep: the same measurement at each thread count, as a table with the scaling
// over one thread beside the sgemm rate's, so a machine's scaling shows at a glance.
static int run_threads_sweep(BenchSetup& s, const BenchOptions& opt) {
  const BenchSteps steps{opt.steps, opt.warmup};
  announce(s, opt, "threads swept");
  std::printf("threads  train img/s  eval img/s  sgemm GFLOP/s  train %%sgemm  eval %%sgemm  "
              "train x1  eval x1  sgemm x1  update %%\n");
  nlohmann::json rows = nlohmann::json::array();
  Throughput one;
  for (int threads : sweep_thread_counts()) {
    set_num_threads(threads);
    const Throughput t = measure_rounds(s, steps, opt.rounds).best.rates;
    if (threads == 1) one = t;
    std::printf("%7d  %11.1f  %10.1f  %13.1f  %11.1f%%  %10.1f%%  %8.2f  %7.2f  %8.2f  %7.2f%%\n",
                threads, t.train_ips, t.eval_ips, t.sgemm, t.train_percent, t.eval_percent,
                t.train_ips / one.train_ips, t.eval_ips / one.eval_ips, t.sgemm / one.sgemm,
                100 * t.update_and_clear_share());
    std::fflush(stdout);
    rows.push_back({{"threads", threads},
                    {"train_img_per_s", t.train_ips},
                    {"eval_img_per_s", t.eval_ips},
                    {"sgemm_gflops", t.sgemm},
                    {"train_percent_of_sgemm", t.train_percent},
                    {"eval_percent_of_sgemm", t.eval_percent},
                    {"serial_time_share", t.update_and_clear_share()}});
  }
  const int cores = max_work_blocks();
  Latency latency;
  if (opt.latency_images > 0) {
    latency = measure_latency_on_threads(s.model, s.acts.compute, opt.latency_images,
                                         opt.latency_threads);
    print_latency(opt, latency);
  }
  std::printf("gemm kernels %s, %d cores, batch %d\n", s.acts.compute.kernels_name().c_str(), cores, s.B);
  if (!opt.json_path.empty()) {
    nlohmann::json j = {{"attention", config_name(s.mc.attention)}, {"threads_sweep", rows},
                        {"cores", cores}, {"batch_size", s.B}, {"tokens", s.mc.tokens()},
                        {"steps", opt.steps}, {"gemm_kernels", s.acts.compute.kernels_name()},
                        {"layers_level", isa_name(s.acts.compute.isa)},
                        {"precision", config_name(s.acts.compute.effective_precision(s.config.train.precision))},
                        {"blas_kernels", blas_kernel_name()}, {"config", opt.config_path},
                        {"latency_images", opt.latency_images}, {"rounds", opt.rounds}};
    if (opt.latency_images > 0) {
      j["latency_threads"] = opt.latency_threads;
      j["latency_median_ms"] = latency.median_ms;
      j["latency_p99_ms"] = latency.p99_ms;
    }
    write_file_atomic(opt.json_path, j.dump(2) + "\n");
  }
  return 0;
}

// "lo-hi" of one rate over the rounds.
template <class Rate>
static std::string range_of(const std::vector<BenchRound>& each, Rate rate) {
  double lo = rate(each.front()), hi = lo;
  for (const BenchRound& r : each) lo = std::min(lo, rate(r)), hi = std::max(hi, rate(r));
  char text[64];
  std::snprintf(text, sizeof text, "%.1f-%.1f", lo, hi);
  return text;
}

// With --rounds above 1, the line under the figures that says each is a best, and how far
// the rounds spread.
static void print_round_ranges(const BenchRounds& rounds, bool every_patch, bool openblas,
                               bool bf16) {
  const auto& each = rounds.each;
  std::printf("rounds %zu, each line the best of them: train %s img/s", each.size(),
              range_of(each, [](const BenchRound& r) { return r.rates.train_ips; }).c_str());
  if (every_patch)
    std::printf(", on every patch %s",
                range_of(each, [](const BenchRound& r) { return r.every_patch.ips; }).c_str());
  std::printf(", eval %s, sgemm %s GFLOP/s",
              range_of(each, [](const BenchRound& r) { return r.rates.eval_ips; }).c_str(),
              range_of(each, [](const BenchRound& r) { return r.rates.sgemm; }).c_str());
  if (openblas)
    std::printf(", through OpenBLAS %s",
                range_of(each, [](const BenchRound& r) { return r.openblas_sgemm; }).c_str());
  if (bf16)
    std::printf(", bf16 %s",
                range_of(each, [](const BenchRound& r) { return r.bf16_gemm; }).c_str());
  std::printf("\n");
}

// The rates of each round, for --json.
static nlohmann::json rounds_json(const BenchRounds& rounds, bool every_patch, bool openblas,
                                  bool bf16) {
  nlohmann::json each = nlohmann::json::array();
  for (const BenchRound& r : rounds.each) {
    nlohmann::json j = {{"train_img_per_s", r.rates.train_ips},
                        {"eval_img_per_s", r.rates.eval_ips},
                        {"sgemm_gflops", r.rates.sgemm}};
    if (every_patch) j["train_every_patch_img_per_s"] = r.every_patch.ips;
    if (openblas) j["openblas_sgemm_gflops"] = r.openblas_sgemm;
    if (bf16) j["bf16_gemm_gflops"] = r.bf16_gemm;
    each.push_back(j);
  }
  return each;
}

namespace {
// Everything one `bench` run measured, to print and to write as JSON.
struct BenchReport {
  int threads = 0;
  bool every_patch = false;   // train.unmasked_epochs: the every-patch steps timed too
  bool openblas_too = false;  // OpenBLAS's rate on the same product beside minivit's own
  bool bf16 = false;          // the training products in bf16, and their rate measured
  std::string blas_problem;   // why OpenBLAS's kernels cannot run here, or empty
  BenchRounds rounds;
  Latency latency;
  LoaderRate loader;
  double peak_rss_mb = 0.0;
};
}  // namespace

static void print_report(const BenchSetup& s, const BenchOptions& opt, const BenchReport& r) {
  const ModelConfig& mc = s.mc;
  const Throughput& t = r.rounds.best.rates;
  const EveryPatchRate& tail = r.rounds.best.every_patch;
  std::printf("train  %8.1f img/s  %6.1f GFLOP/s  (%4.1f%% of sgemm)  %.2f ms/step\n", t.train_ips,
              t.train_gflops, t.train_percent, 1e3 * t.train_s / opt.steps);
  if (r.every_patch)
    std::printf("train  %8.1f img/s  %6.1f GFLOP/s  (%4.1f%% of sgemm)  %.2f ms/step on every "
                "patch (the last %d epochs: train.unmasked_epochs)\n",
                tail.ips, tail.gflops, tail.percent, tail.ms_per_step,
                s.config.train.unmasked_epochs);
  std::printf("eval   %8.1f img/s  %6.1f GFLOP/s  (%4.1f%% of sgemm)  %.2f ms/batch\n", t.eval_ips,
              t.eval_gflops, t.eval_percent, 1e3 * t.eval_s / opt.steps);
  if (opt.latency_images > 0) print_latency(opt, r.latency);
  if (opt.loader)
    std::printf("loader %8.1f img/s  %.3f ms/batch on one thread, %.1fx the training step's rate "
                "(%s, %lld training images)\n",
                r.loader.ips, r.loader.ms_per_batch, r.loader.ips / t.train_ips,
                s.config.data.path.c_str(), static_cast<long long>(r.loader.train_images));
  std::printf("sgemm  %6.1f GFLOP/s at (%d x %d x %d); %.1f MFLOP/image train, %.1f forward\n",
              t.sgemm, s.B * mc.tokens(), 3 * mc.dim, mc.dim, vit_train_flops(mc) / 1e6,
              vit_forward_flops(mc) / 1e6);
  if (r.openblas_too)
    std::printf("sgemm  %6.1f GFLOP/s through OpenBLAS (%s kernels) on the same product\n",
                r.rounds.best.openblas_sgemm, blas_kernel_name());
  else if (s.acts.compute.kernels != GemmKernels::openblas)
    std::printf("sgemm  OpenBLAS not measured: %s\n", r.blas_problem.c_str());
  if (r.bf16)
    std::printf("bf16   %6.1f GFLOP/s on the same product in bf16, the training products' "
                "precision (%.2fx the sgemm line)\n",
                r.rounds.best.bf16_gemm, r.rounds.best.bf16_gemm / t.sgemm);
  std::printf("attention core: %.1f%% of training time, %.1f%% of the FLOPs\n",
              100 * t.attention_share, 100 * vit_attention_flop_share(mc));
  std::printf("step phases: forward %.1f%%, backward %.1f%%, update %.2f%%, clearing gradients "
              "%.2f%%\n",
              100 * t.forward_share, 100 * t.backward_share, 100 * t.update_share,
              100 * t.clear_share);
  std::printf("threads %d, gemm kernels %s, peak RSS %.0f MB, activations %.0f MB\n", r.threads,
              s.acts.compute.kernels_name().c_str(), r.peak_rss_mb, s.acts.bytes() / 1048576.0);
  if (opt.rounds > 1) print_round_ranges(r.rounds, r.every_patch, r.openblas_too, r.bf16);
}

static nlohmann::json report_json(const BenchSetup& s, const BenchOptions& opt,
                                  const BenchReport& r) {
  const ModelConfig& mc = s.mc;
  const Throughput& t = r.rounds.best.rates;
  // With OpenBLAS's kernels in use, their rate is the sgemm line's.
  const double openblas_sgemm = r.openblas_too ? r.rounds.best.openblas_sgemm : t.sgemm;
  nlohmann::json j = {{"attention", config_name(mc.attention)},
                      {"train_img_per_s", t.train_ips},
                      {"eval_img_per_s", t.eval_ips},
                      {"gflops", t.train_gflops},
                      {"eval_gflops", t.eval_gflops},
                      {"sgemm_gflops", t.sgemm},
                      {"openblas_sgemm_gflops", r.blas_problem.empty()
                                                    ? nlohmann::json(openblas_sgemm)
                                                    : nlohmann::json(nullptr)},
                      {"bf16_gemm_gflops", r.bf16 ? nlohmann::json(r.rounds.best.bf16_gemm)
                                                  : nlohmann::json(nullptr)},
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
                      {"threads", r.threads},
                      {"batch_size", s.B},
                      {"tokens", mc.tokens()},
                      {"steps", opt.steps},
                      {"gemm_kernels", s.acts.compute.kernels_name()},
                      {"layers_level", isa_name(s.acts.compute.isa)},
                      {"precision", config_name(s.acts.compute.effective_precision(s.config.train.precision))},
                      {"blas_kernels", blas_kernel_name()},
                      {"peak_rss_mb", r.peak_rss_mb},
                      {"config", opt.config_path}};
  if (r.every_patch) {  // the train.unmasked_epochs steps
    j["train_every_patch_img_per_s"] = r.rounds.best.every_patch.ips;
    j["train_every_patch_percent_of_sgemm"] = r.rounds.best.every_patch.percent;
  }
  if (opt.loader) {
    j["loader_img_per_s"] = r.loader.ips;
    j["loader_ms_per_batch"] = r.loader.ms_per_batch;
  }
  j["rounds"] = opt.rounds;
  j["each_round"] = rounds_json(r.rounds, r.every_patch, r.openblas_too, r.bf16);
  j["latency_images"] = opt.latency_images;  // 0: not measured, and no latency figures
  if (opt.latency_images > 0) {
    j["latency_threads"] = opt.latency_threads;
    j["latency_median_ms"] = r.latency.median_ms;
    j["latency_p99_ms"] = r.latency.p99_ms;
  }
  return j;
}

int run_bench(const BenchOptions& opt) {
  const BenchSteps steps{opt.steps, opt.warmup};
  Config config = load_config(opt.config_path, opt.sets);
  if (opt.steps < 1) throw Error("--steps: must be at least 1, got " + std::to_string(opt.steps));
  if (opt.rounds < 1) throw Error("--rounds: must be at least 1, got " + std::to_string(opt.rounds));
  if (opt.latency_images < 0)
    throw Error("--latency-images: must be 0 (skip the latency measurement) or more, got " +
                std::to_string(opt.latency_images));
  if (opt.latency_threads < 1)
    throw Error("--latency-threads: must be at least 1, got " +
                std::to_string(opt.latency_threads));
  BenchSetup s(config);
  if (opt.threads_sweep) return run_threads_sweep(s, opt);

  BenchReport r;
  r.threads = set_num_threads(config.train.threads);
  announce(s, opt, std::to_string(r.threads) + " threads");
  // The config check admits train.unmasked_epochs only with model.patch_drop.
  r.every_patch = config.train.unmasked_epochs > 0;
  r.blas_problem = blas_core_problem();
  r.openblas_too = s.acts.compute.kernels != GemmKernels::openblas && r.blas_problem.empty();
  RoundExtras extras;
  extras.every_patch = r.every_patch;
  extras.openblas = r.openblas_too;
  extras.bf16 = s.acts.compute.effective_precision(config.train.precision) == Precision::bf16;
  r.rounds = measure_rounds(s, steps, opt.rounds, extras);
  r.bf16 = r.rounds.best.bf16_gemm > 0;
  if (opt.latency_images > 0)
    r.latency = measure_latency_on_threads(s.model, s.acts.compute, opt.latency_images,
                                           opt.latency_threads);
  if (opt.loader) r.loader = measure_loader_rate(config, std::max(opt.steps, 20));
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  r.peak_rss_mb = usage.ru_maxrss / 1024.0;

  print_report(s, opt, r);
  if (r.bf16 && r.rounds.best.bf16_gemm < r.rounds.best.rates.sgemm)
    std::fprintf(stderr,
                 "note: bf16 products ran at %.2fx the fp32 rate here; train.precision = "
                 "\"fp32\" may train faster on this CPU (bench --set train.precision=fp32 "
                 "measures it)\n",
                 r.rounds.best.bf16_gemm / r.rounds.best.rates.sgemm);
  if (!opt.json_path.empty()) write_file_atomic(opt.json_path, report_json(s, opt, r).dump(2) + "\n");
  return 0;
}

}  // namespace minivit
