// The trainer's setup after its constructor's first lines: the run directory and its lock,
// the data and its splits, the model (fresh, from --init or from the resume state), the run
// files, and what it prints before the first step. The loop and the end: trainer.cpp.
#include "minivit/train/trainer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/data/data.h"
#include "minivit/formats/config_file.h"
#include "minivit/kernels/gemm.h"
#include "minivit/kernels/runtime.h"
#include "minivit/kernels/threads.h"
#include "minivit/train/distributed.h"
#include "minivit/train/evaluate.h"
#include "minivit/train/resume_history.h"
#include "minivit/train/splits.h"

namespace minivit {

// Setup failed: a run directory this trainer made goes again, if nothing but the lock is in
// it (a file setup began to write stays, to be seen). Only while holding the lock: a trainer
// that lost the race for a directory it also saw missing must not take the winner's lock.
void Trainer::forget_new_run_directory() {
  if (!made_out_dir_ || !run_lock_) return;
  std::error_code ignored;
  std::filesystem::remove(path_in(out_dir_, RunLock::file_name()), ignored);  // still held
  run_lock_.reset();
  std::filesystem::remove(out_dir_, ignored);  // only while empty
}

void Trainer::open_run_directory(const std::string& resume_dir) {
  resuming_ = !resume_dir.empty();
  out_dir_ = config_.train.out_dir;
  resume_path_ = path_in(resuming_ ? resume_dir : out_dir_, "resume.safetensors");
  last_path_ = path_in(out_dir_, "last.safetensors");
  best_path_ = path_in(out_dir_, "best.safetensors");
  ema_path_ = path_in(out_dir_, "ema.safetensors");
  metrics_path_ = path_in(out_dir_, "metrics.jsonl");
  if (resuming_ && !file_exists(resume_path_))
    throw Error(resume_path_ + ": no resume state here; is --resume the run directory of an earlier `minivit train`?");
  if (!root_) return;  // the run directory is rank 0's alone
  made_out_dir_ = !std::filesystem::exists(out_dir_);
  ensure_writable_dir(out_dir_);
  // Before anything in the directory is touched: a live trainer's temporaries are not stale.
  run_lock_.emplace(out_dir_);
  remove_stale_temporaries(out_dir_);  // left by a run that was killed mid-write
  if (!resuming_ && file_exists(resume_path_))
    throw Error(out_dir_ + ": already holds a training run; continue it with --resume " + out_dir_ +
                " or choose another --out");
}

void Trainer::prepare_data() {
  data_ = load_data(config_.data, config_.model);
  check_data_fits_model(data_.train, config_.model, config_.data.path + " (train split)");
  check_data_fits_model(data_.test, config_.model, config_.data.path + " (test split)");
  train_indices_ = images_of_split(data_, Split::train, config_).indices;
  val_indices_ = images_of_split(data_, Split::val, config_).indices;
  class_names_ = class_names_for(data_.train.class_names, config_.model.num_classes);
  batch_size_ = config_.train.batch_size;
  if (batch_size_ < ranks_)
    throw Error("train.batch_size: " + std::to_string(batch_size_) + " is smaller than the " +
                std::to_string(ranks_) + " ranks; each rank needs at least one image of every batch");
  // Contiguous shards whose sizes differ by at most one: images [r B / R, (r + 1) B / R).
  const int r = distributed::rank();
  shard_first_ = int(int64_t(r) * batch_size_ / ranks_);
  shard_size_ = int(int64_t(r + 1) * batch_size_ / ranks_) - shard_first_;
  steps_per_epoch_ = minivit::steps_per_epoch(int64_t(train_indices_.size()), batch_size_);
  total_steps_ = config_.train.max_steps > 0 ? config_.train.max_steps
                                             : config_.train.epochs * steps_per_epoch_;
  total_epochs_ = (total_steps_ + steps_per_epoch_ - 1) / steps_per_epoch_;
  const int64_t unmasked_steps = int64_t(config_.train.unmasked_epochs) * steps_per_epoch_;
  unmasked_from_step_ = std::max<int64_t>(0, total_steps_ - unmasked_steps);
  step_clock_ = StepClock(double(config_.model.tokens()) / config_.model.train_tokens());
}

void Trainer::create_model(const std::string& init_path) {
  model_.emplace(config_.model);
  model_->init(config_.train.seed);
  optimizer_.emplace(config_.optim, model_->num_params);
  if (resuming_) {
    Config started_with;
    progress_ = load_resume_state(resume_path_, *model_, *optimizer_, &started_with);
    if (root_) warn_about_changed_keys(started_with, config_);
    if (progress_.step > total_steps_)
      throw Error(resume_path_ + ": the run is already at step " + std::to_string(progress_.step) +
                  ", past the configured " + std::to_string(total_steps_) + " steps");
  } else if (!init_path.empty()) {
    load_weights(*model_, read_safetensors(init_path), init_path);
  }
  acts_.emplace(config_.model, batch_size_, ActivationsFor::training);
  acts_->block_products = config_.train.precision;
  acts_->compute.threads = num_threads();
  if (root_) {  // rank 0 alone validates and tests
    eval_acts_.emplace(config_.model, eval_batch_size(batch_size_), ActivationsFor::evaluation);
    eval_acts_->compute = acts_->compute;
  }
  if (config_.optim.ema_decay > 0.0f) averaged_.emplace(config_.model);
}

void Trainer::open_run_files() {
  if (!root_) return;
  write_file_atomic(path_in(out_dir_, "config.toml"), config_to_toml(config_));
  write_file_atomic(metrics_path_,
                    metrics_up_to(metrics_path_, resuming_ ? progress_.step : -1, epoch_points_));
  metrics_.open(metrics_path_, std::ios::app);
}

void Trainer::announce(const std::string& config_path, int threads) const {
  std::fprintf(stderr,
               "minivit train: %s | %lld params | %lld train / %lld val / %lld test images | "
               "%lld steps (%lld epochs of %lld) | batch %d | %s | %s products on %s | out %s%s\n",
               config_path.c_str(), (long long)model_->num_params, (long long)train_indices_.size(),
               (long long)val_indices_.size(), (long long)data_.test.size(), (long long)total_steps_,
               (long long)total_epochs_, (long long)steps_per_epoch_, batch_size_,
               (ranks_ > 1 ? strprintf("%d ranks x %d threads", ranks_, threads)
                           : strprintf("%d threads", threads)).c_str(),
               std::string(config_name(acts_->compute.effective_precision(config_.train.precision))).c_str(),
               acts_->compute.kernels_name().c_str(), out_dir_.c_str(),
               resuming_ ? strprintf(" | resuming at step %lld", (long long)progress_.step).c_str() : "");
  if (const std::string note = Compute::environment_note(); !note.empty())
    std::fprintf(stderr, "%s\n", note.c_str());
  if (const std::string advice = blas_kernel_advice(acts_->compute); !advice.empty())
    std::fprintf(stderr, "%s\n", advice.c_str());
  if (const std::string note = acts_->compute.precision_note(config_.train.precision);
      !note.empty())
    std::fprintf(stderr, "%s\n", note.c_str());
  if (config_.train.unmasked_epochs > 0)
    std::fprintf(stderr,
                 "patch dropout %g until step %lld, then every patch (train.unmasked_epochs = "
                 "%d)\n",
                 double(config_.model.patch_drop), (long long)unmasked_from_step_,
                 config_.train.unmasked_epochs);
  note_oversubscription(threads);
}

// Ranks on one machine share its cores; more threads than cores slow every rank down (each
// step waits for the slowest), so it is said, not refused.
void Trainer::note_oversubscription(int threads) const {
  const int here = distributed::ranks_on_host();
  const unsigned cores = std::thread::hardware_concurrency();
  if (here > 1 && cores > 0 && int64_t(here) * threads > int64_t(cores))
    std::fprintf(stderr,
                 "note: %d ranks x %d threads on this host exceed its %u cores; set train.threads "
                 "to %u or fewer (threads per rank)\n",
                 here, threads, cores, std::max(1u, cores / unsigned(here)));
}

}  // namespace minivit
