#pragma once
// The training loop of `minivit train`, phase by phase. Setup (the constructor) prepares
// the run directory, the data, the model and the optimiser, resumed or initialised; step()
// is one optimisation step with its metrics; end_of_epoch() validates, checkpoints, logs
// and plots; finish() saves, then reports a stop or evaluates on the test split. run()
// drives them. The run directory holds config.toml, metrics.jsonl, last.safetensors,
// best.safetensors, resume.safetensors, curves.png and eval.json.
//
// SIGINT and SIGTERM, from setup until the trainer is destroyed, ask the loop to stop after
// the current step and save; a second signal leaves at once.
//
// Started by mpirun in a build with MPI (distributed.h), each of R ranks runs this trainer
// on one model: every rank builds the same global batch and computes the gradient of its
// contiguous shard of it, the gradients are summed in one allreduce, and every rank takes the
// same optimizer step, so the weights follow a single process's within float rounding. Rank
// 0 alone touches the run directory, logs, validates, evaluates and prints; the others only
// compute. A stop signal on any rank stops all of them after the same step.
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "minivit/core/config.h"
#include "minivit/core/progress.h"
#include "minivit/data/batcher.h"
#include "minivit/data/dataset.h"
#include "minivit/formats/checkpoint.h"
#include "minivit/inspect/plot.h"
#include "minivit/model/optimizer.h"
#include "minivit/model/train_step.h"
#include "minivit/model/vit.h"
#include "minivit/train/run_lock.h"
#include "minivit/train/step_clock.h"

namespace minivit {

struct TrainerOptions {
  Config config;            // resolved; train.out_dir is the run directory
  std::string config_path;  // where `config` was read from, for the opening line
  std::string resume_dir;   // a run directory to continue; empty for a new run
  std::string init_path;    // safetensors weights a new run starts from; empty: seeded init
};

class Trainer {
 public:
  // Setup. Runs no collective, so that every rank can fail alone and the caller agrees on
  // the outcome (distributed::agree_on_setup) before run(). Throws minivit::Error, before
  // any training, for what the user can fix: no resume
  // state in resume_dir, a directory another live trainer holds (run_lock.h), a new run
  // into a directory that holds one, a model too large for
  // memory, data that does not fit the model, a batch larger than the training split, a
  // resumed run already past its configured steps.
  explicit Trainer(TrainerOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Gives every rank rank 0's weights and optimizer state, then steps to total_steps() or a
  // stop signal, closing every completed epoch, then finish().
  int run();

  // One optimisation step on the next batch. Writes a step line to metrics.jsonl every
  // train.log_every steps and at the last step, and updates the progress line. Throws
  // minivit::Error, naming the last good checkpoint, when the loss or gradient is not finite.
  void step();
  // Whether the last step completed an epoch or reached total_steps().
  bool at_epoch_end() const;
  // Closes the epoch the last step belongs to: validation (every train.eval_every epochs
  // and at the last step), last, resume and best checkpoints, the epoch line of
  // metrics.jsonl, curves.png and the epoch's summary line.
  void end_of_epoch();
  // Saves what is not saved yet. After a stop signal, says how to continue and returns
  // 128 + the signal; otherwise evaluates last.safetensors' weights (and, with
  // optim.ema_decay, ema.safetensors') on the test split, writes eval.json and the test line
  // of metrics.jsonl, and returns 0.
  int finish();

  const TrainingProgress& progress() const { return progress_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t total_steps() const { return total_steps_; }

 private:
  void open_run_directory(const std::string& resume_dir);
  void forget_new_run_directory();
  void prepare_data();
  void create_model(const std::string& init_path);
  void open_run_files();
  void announce(const std::string& config_path, int threads) const;
  [[noreturn]] void fail_on_nonfinite_loss(const StepResult& result);
  void report_step(const StepResult& result, float lr, int64_t epoch);
  void save_last_and_resume();
  const ViT* averaged_model();
  nlohmann::json validate_average(std::string& val_text);
  void log_metrics(const nlohmann::json& line);
  void note_oversubscription(int threads) const;
  bool stop_requested() const;
  void agree_on_step(StepResult& result);
  void check_replicas_agree() const;
  void report_profile() const;

  Config config_;
  bool root_ = true;                // rank 0, which alone writes and prints
  int ranks_ = 1;
  int shard_first_ = 0, shard_size_ = 0;  // this rank's images of every global batch
  bool stop_agreed_ = false;        // a stop signal reached some rank (several ranks)
  int stop_signal_ = 0;
  std::optional<RunLock> run_lock_;  // held on out_dir_ from setup until destruction
  bool made_out_dir_ = false;  // out_dir_ did not exist before this trainer
  bool resuming_ = false;
  std::string out_dir_, resume_path_, last_path_, best_path_, ema_path_, metrics_path_;

  DataSplits data_;
  std::vector<int64_t> train_indices_, val_indices_;
  std::vector<std::string> class_names_;
  int batch_size_ = 0;
  int64_t steps_per_epoch_ = 0, total_steps_ = 0, total_epochs_ = 0;
  int64_t unmasked_from_step_ = 0;  // the first step on every patch (train.unmasked_epochs)

  std::optional<ViT> model_;
  std::optional<Optimizer> optimizer_;
  std::optional<ViT> averaged_;  // holds the optimizer's weight average to evaluate and save it
  double averaged_val_top1_ = -1.0;  // of the average at the last validation
  std::optional<Activations> acts_;       // the training steps'
  std::optional<Activations> eval_acts_;  // rank 0's validation and test passes' (evaluate.h)
  std::optional<TrainBatches> batches_;
  std::optional<BatchPrefetcher> prefetcher_;

  TrainingProgress progress_;
  int64_t saved_step_ = -1;  // the step last.safetensors and resume.safetensors hold, -1: none
  std::ofstream metrics_;
  std::vector<EpochPoint> epoch_points_;  // for curves.png
  ProgressLine line_;

  // Means since the last metrics step line, for the next one.
  double window_loss_ = 0.0;
  int64_t window_correct_ = 0, window_seen_ = 0;

  // Throughput counts only the steps themselves, not validation or checkpoints.
  std::chrono::steady_clock::time_point run_start_, epoch_start_;
  StepClock step_clock_;  // per phase (patches dropped or not), for images/s and the ETA
  // MINIVIT_MPI_PROFILE: time in forward/backward, waiting for the slowest rank (a barrier,
  // only when profiling) and in the gradient sum, since setup.
  bool profile_ = false;
  double compute_seconds_ = 0.0, imbalance_seconds_ = 0.0, reduce_seconds_ = 0.0;
  int64_t steps_here_ = 0;

  struct sigaction previous_sigint_ {}, previous_sigterm_ {};
};

}  // namespace minivit
