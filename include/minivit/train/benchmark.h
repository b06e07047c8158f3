#pragma once
// What `minivit bench` measures, at a config's shapes on synthetic data (no dataset needed):
// training and evaluation throughput with the FLOP rate against the sgemm rate measured in
// the same run, so that figures of different machines compare as ratios; the rate of steps
// over every patch; and the latency of one image on one thread. The command prints them.
#include <cstdint>
#include <vector>

#include "minivit/core/config.h"
#include "minivit/kernels/compute.h"
#include "minivit/model/activations.h"
#include "minivit/model/optimizer.h"
#include "minivit/model/vit.h"

namespace minivit {

// How many timed steps (and batches) follow how many untimed ones.
struct BenchSteps {
  int steps = 50;
  int warmup = 5;
};

// Single-image latency, as an embedded user meets it: batch 1 on one thread, each forward
// timed on its own. The images cycle through a set of different ones, so the figure is not
// that of one input held in cache.
struct Latency {
  double median_ms = 0.0, p99_ms = 0.0;
};

// The model, its run state and one synthetic batch at a config's shapes.
struct BenchSetup {
  Config config;
  ModelConfig mc;
  int B, K;
  int64_t image_len;
  ViT model;
  Optimizer optimizer;
  Activations acts;       // the training steps'
  Activations eval_acts;  // the evaluation batches', as `minivit eval` builds them
  std::vector<float> images, targets;  // (B, C*H*W), (B, K)
  std::vector<int32_t> labels;         // (B)

  explicit BenchSetup(const Config& c);
  void train_steps(int n, int64_t first);  // n steps, dropout keyed from step `first` on
  // The steps of train.unmasked_epochs: every patch through the blocks, switched as the
  // trainer switches (the activations hold every token either way).
  void train_on_every_patch(bool every_patch);
  // An evaluation batch goes through the model in the passes evaluate() makes, on
  // activations built for evaluation as `minivit eval`'s and the C API's are.
  void eval_batch();
  // GFLOP/s of the model's largest product, the queries', keys' and values' (B*T, D) x
  // (D, 3D), on `products` and the pool's threads: in fp32 the yardstick of every rate.
  double largest_product_gflops(Products products) const;
};

struct Throughput {
  double train_s = 0.0, eval_s = 0.0;  // for BenchSteps::steps steps and batches
  double train_ips = 0.0, eval_ips = 0.0, train_gflops = 0.0, eval_gflops = 0.0;
  double sgemm = 0.0;  // GFLOP/s on the model's largest product, same threads
  double train_percent = 0.0, eval_percent = 0.0;  // of the sgemm rate
  double attention_share = 0.0;  // of the training time
  // The step's phases, as shares of the training time (train_step.h).
  double clear_share = 0.0, forward_share = 0.0, backward_share = 0.0, update_share = 0.0;
  // The update's and the clearing's: the part of a step outside forward and backward.
  double update_and_clear_share() const { return clear_share + update_share; }
};

// With train.unmasked_epochs the run ends on steps over every patch, several times dearer
// than the dropped-patch ones measure_throughput() times: their rate on its own, so the
// length of the whole run can be judged before it starts.
struct EveryPatchRate {
  double ips = 0.0, gflops = 0.0, percent = 0.0, ms_per_step = 0.0;
};

// Training steps and evaluation batches on the thread pool as it is set, and the sgemm rate
// on the same threads.
Throughput measure_throughput(BenchSetup& s, const BenchSteps& opt);

EveryPatchRate measure_every_patch_rate(BenchSetup& s, const BenchSteps& opt,
                                        double sgemm_gflops);

// One round of the rates `bench` prints, measured one after another so that each ratio sets
// side by side figures of the same moment.
struct BenchRound {
  Throughput rates;
  EveryPatchRate every_patch;   // measured when asked (train.unmasked_epochs), else 0
  double openblas_sgemm = 0.0;  // the same product through OpenBLAS when asked for, else 0
  // The same product in bf16 when asked for (the training products run in bf16), else 0:
  // on a CPU whose bf16 products are no faster than its fp32 ones, fp32 trains faster.
  double bf16_gemm = 0.0;
};

// What a round measures beside the training and evaluation rates, each only where asked:
// the steps over every patch, and the largest product through OpenBLAS and in bf16.
struct RoundExtras {
  bool every_patch = false, openblas = false, bf16 = false;
};

// `rounds` rounds, one after another, and the best of each rate over them: a machine that
// others share slows some rounds, and the best of several is the closest to its own rate.
// The best round's percentages are of the best sgemm rate; its shares of the training time
// are those of the round with the fastest training steps.
struct BenchRounds {
  BenchRound best;
  std::vector<BenchRound> each;  // in the order measured
};
BenchRounds measure_rounds(BenchSetup& s, const BenchSteps& opt, int rounds,
                           RoundExtras extras = {});

// Over `images` forwards on `threads` threads (the Compute's own count, the pool left as it
// was): on more than one, each image's layers split across them (model/vit_forward.cpp).
Latency measure_latency_on_threads(const ViT& model, const Compute& compute, int images,
                                   int threads);

// The training batches of the config's own dataset, made as the trainer's prefetch thread
// makes them (reading, augmentation, normalisation, targets) on the calling thread alone:
// the rate the data path can feed, to set beside the step's. `batches` timed batches
// follow one untimed; the dataset is loaded first and not timed.
struct LoaderRate {
  double ips = 0.0;       // images per second
  double ms_per_batch = 0.0;
  int64_t train_images = 0;  // in the training split
};
LoaderRate measure_loader_rate(const Config& config, int batches);

// 1, 2, 4, ... threads up to the machine's cores, and the core count itself.
std::vector<int> sweep_thread_counts();

}  // namespace minivit
