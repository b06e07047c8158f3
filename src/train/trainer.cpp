#include "minivit/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/core/rng.h"
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

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// A signal handler may only set a volatile std::sig_atomic_t (or a lock-free atomic) of
// static storage, so the request to stop lives here, not in the Trainer. The first
// SIGINT/SIGTERM asks the loop to stop after the current step and save; a second one leaves
// at once (every file is written by atomic rename, so nothing is left half-written).
static volatile std::sig_atomic_t g_stop_requested = 0;

static void on_stop_signal(int sig) {
  if (g_stop_requested) ::_exit(128 + sig);
  g_stop_requested = sig;
}

static double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// FNV-1a over the bytes of a buffer: replicas that hold the same weights bit for bit have
// the same fingerprint.
static uint64_t fingerprint(const float* data, int64_t n) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(data);
  uint64_t h = 1469598103934665603ull;
  for (int64_t i = 0; i < n * int64_t(sizeof(float)); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

// --- setup (the run directory, the data, the model: trainer_setup.cpp) -------------------------

Trainer::Trainer(TrainerOptions options) : config_(std::move(options.config)) {
  root_ = distributed::is_root();
  ranks_ = distributed::ranks();
  profile_ = std::getenv("MINIVIT_MPI_PROFILE") != nullptr;
  int threads = 0;
  try {
    open_run_directory(options.resume_dir);
    check_vit_fits_memory(config_.model, config_.train.batch_size, ActivationsFor::training);
    threads = set_num_threads(config_.train.threads);
    prepare_data();
    create_model(options.init_path);
    open_run_files();
  } catch (...) {
    forget_new_run_directory();  // a bad --init or data path leaves no empty run behind
    throw;
  }
  if (root_) announce(options.config_path, threads);
  batches_.emplace(data_.train, train_indices_, config_, steps_per_epoch_);
  prefetcher_.emplace(*batches_);
  saved_step_ = resuming_ ? progress_.step : -1;

  // Last, so that a setup that throws leaves no handler behind (the destructor would not
  // run to restore it). A flag left by an earlier trainer in this process must not stop
  // this one.
  g_stop_requested = 0;
  sigaction(SIGINT, nullptr, &previous_sigint_);
  sigaction(SIGTERM, nullptr, &previous_sigterm_);
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  run_start_ = epoch_start_ = Clock::now();
}

Trainer::~Trainer() {
  sigaction(SIGINT, &previous_sigint_, nullptr);
  sigaction(SIGTERM, &previous_sigterm_, nullptr);
}

// --- the loop ---------------------------------------------------------------------------------

int Trainer::run() {
  // The replicas start from rank 0's state whatever each rank read (a --init or --resume
  // file that differs between hosts cannot split them).
  if (ranks_ > 1) {
    distributed::broadcast(model_->weights.data(), model_->num_params);
    distributed::broadcast(optimizer_->m.data(), model_->num_params);
    distributed::broadcast(optimizer_->v.data(), model_->num_params);
    if (averaged_) {
      float updates = float(optimizer_->average_updates);
      distributed::broadcast(&updates, 1);
      optimizer_->average_updates = int64_t(updates);
      distributed::broadcast(optimizer_->average.data(), model_->num_params);
    }
  }
  while (progress_.step < total_steps_ && !stop_requested()) {
    do {
      step();
    } while (!at_epoch_end() && !stop_requested());
    if (!at_epoch_end()) break;  // stopped by a signal mid-epoch
    end_of_epoch();
  }
  return finish();
}

// One process reads its own flag; ranks read the one they agreed on after the last step, so
// all of them stop after the same step.
bool Trainer::stop_requested() const { return ranks_ == 1 ? g_stop_requested != 0 : stop_agreed_; }

bool Trainer::at_epoch_end() const {
  return progress_.step % steps_per_epoch_ == 0 || progress_.step == total_steps_;
}

void Trainer::step() {
  const auto start = Clock::now();
  const int64_t epoch = progress_.step / steps_per_epoch_;
  const Batch& batch = prefetcher_->get(progress_.step);
  const float lr = learning_rate(config_.optim, progress_.step, total_steps_);
  // This rank's shard of the global batch (all of it in one process).
  const int64_t image_len = int64_t(batch.images.shape()[1]);
  const int K = config_.model.num_classes;
  // From the step alone, so a resumed run switches where an uninterrupted one does.
  const bool every_patch = progress_.step >= unmasked_from_step_;
  model_->config.patch_drop = every_patch ? 0.0f : config_.model.patch_drop;
  StepResult result = shard_gradients(
      *model_, *acts_, batch.images.data() + shard_first_ * image_len,
      batch.targets.data() + int64_t(shard_first_) * K, batch.labels.data() + shard_first_,
      shard_size_, rng_key(config_.train.seed, kRngDropout, uint64_t(progress_.step)),
      shard_first_, batch_size_);
  const auto computed = Clock::now();
  if (profile_) distributed::barrier();
  const auto all_computed = Clock::now();
  distributed::allreduce_sum(model_->grads.data(), model_->num_params);
  compute_seconds_ += std::chrono::duration<double>(computed - start).count();
  imbalance_seconds_ += std::chrono::duration<double>(all_computed - computed).count();
  reduce_seconds_ += seconds_since(all_computed);
  ++steps_here_;
  agree_on_step(result);
  // After the sum, so clipping sees the global gradient and every rank the same one.
  apply_gradients(*model_, *optimizer_, result, lr, config_.optim.clip_grad_norm);
  if (!result.finite) fail_on_nonfinite_loss(result);
  ++progress_.step;
  step_clock_.record(every_patch, seconds_since(start));
  progress_.epoch_loss_sum += double(result.loss) * batch_size_;
  progress_.epoch_correct += result.correct;
  progress_.epoch_seen += batch_size_;
  window_loss_ += double(result.loss) * batch_size_;
  window_correct_ += result.correct;
  window_seen_ += batch_size_;
  report_step(result, lr, epoch);
}

// The whole batch's loss and correct count from the shards', and whether any rank was asked
// to stop. The sum of the gradients already makes the finiteness check agree.
void Trainer::agree_on_step(StepResult& result) {
  if (ranks_ == 1) return;
  double sums[3] = {double(result.loss) * shard_size_, double(result.correct),
                    g_stop_requested ? 1.0 : 0.0};
  distributed::allreduce_sum(sums, 3);
  result.loss = float(sums[0] / batch_size_);
  result.correct = int(sums[1]);
  if (sums[2] > 0 && !stop_agreed_) {
    stop_agreed_ = true;
    stop_signal_ = g_stop_requested ? int(g_stop_requested) : SIGTERM;
  }
}

void Trainer::fail_on_nonfinite_loss(const StepResult& result) {
  if (!root_) throw distributed::ReportedByRoot();
  line_.finish();
  const std::string culprit = first_nonfinite_grad(*model_);
  throw Error(strprintf("step %lld: the loss is %g and the gradient norm %g", (long long)progress_.step,
                        double(result.loss), result.grad_norm) +
              (culprit.empty() ? "" : "; first non-finite gradient in '" + culprit + "'") +
              (saved_step_ >= 0 ? "; the last good checkpoint is " + last_path_ + " (step " +
                                      std::to_string(saved_step_) + ")"
                                : "; no checkpoint was written yet") +
              ". Usual causes: optim.lr too high, no optim.clip_grad_norm, too short optim.warmup_steps");
}

void Trainer::report_step(const StepResult& result, float lr, int64_t epoch) {
  if (!root_) return;
  const double img_per_s = batch_size_ * step_clock_.steps_per_second();
  const int64_t dropped_left = std::max<int64_t>(0, unmasked_from_step_ - progress_.step);
  const double eta =
      step_clock_.seconds_left(dropped_left, total_steps_ - progress_.step - dropped_left);
  const bool log_now = progress_.step % config_.train.log_every == 0 || progress_.step == total_steps_;
  if (log_now) {
    log_metrics({{"type", "step"}, {"step", progress_.step}, {"epoch", epoch + 1},
                 {"loss", window_loss_ / window_seen_},
                 {"acc", double(window_correct_) / window_seen_}, {"lr", lr},
                 {"grad_norm", result.grad_norm}, {"img_per_s", img_per_s},
                 {"time", seconds_since(run_start_)}});
  }
  if (line_.is_terminal() || log_now) {
    line_.update(strprintf("epoch %lld/%lld  step %lld/%lld  loss %.4f  acc %5.1f%%  lr %.2e  %.0f img/s  ETA %s",
                           (long long)epoch + 1, (long long)total_epochs_, (long long)progress_.step,
                           (long long)total_steps_, window_loss_ / window_seen_,
                           100.0 * window_correct_ / window_seen_, double(lr), img_per_s,
                           format_duration(eta).c_str()));
  }
  if (log_now) window_loss_ = 0.0, window_correct_ = 0, window_seen_ = 0;
}

void Trainer::end_of_epoch() {
  line_.finish();
  // The epoch the last step belonged to, whether it ran to its end or max_steps cut it short.
  progress_.epoch = (progress_.step - 1) / steps_per_epoch_ + 1;
  const int64_t seen = std::max<int64_t>(progress_.epoch_seen, 1);
  const double train_loss = progress_.epoch_loss_sum / seen;
  const double train_acc = double(progress_.epoch_correct) / seen;
  progress_.epoch_loss_sum = 0.0, progress_.epoch_correct = 0, progress_.epoch_seen = 0;
  if (!root_) return;  // the other ranks go on to the next step's sum and wait there
  nlohmann::json epoch_json = {{"type", "epoch"}, {"epoch", progress_.epoch}, {"step", progress_.step},
                               {"train_loss", train_loss}, {"train_acc", train_acc}};
  EpochPoint point{int(progress_.epoch), train_loss, train_acc, NAN, NAN};
  std::string val_text = "no validation split";
  bool is_best = false;
  const bool validate_now = progress_.epoch % config_.train.eval_every == 0 || progress_.step == total_steps_;
  if (!val_indices_.empty() && validate_now) {
    const EvalResult val =
        evaluate(*model_, *eval_acts_, data_.train, val_indices_, config_.data.mean,
                 config_.data.std);
    progress_.val_top1 = val.top1;
    is_best = val.top1 > progress_.best_val_top1;
    if (is_best) progress_.best_val_top1 = val.top1, progress_.best_step = progress_.step;
    epoch_json["val_loss"] = val.loss;
    epoch_json["val_acc"] = val.top1;
    point.val_loss = val.loss;
    point.val_acc = val.top1;
    val_text = strprintf("val loss %.4f  acc %.2f%%%s", val.loss, 100 * val.top1, is_best ? " (best)" : "");
    epoch_json.update(validate_average(val_text));
  } else if (val_indices_.empty()) {
    is_best = true;  // without a validation split the latest weights are the best we know
    progress_.best_step = progress_.step;
  } else {
    val_text = "validation every " + std::to_string(config_.train.eval_every) + " epochs";
  }
  epoch_json["time"] = seconds_since(run_start_);
  save_last_and_resume();
  if (is_best) save_checkpoint(best_path_, *model_, config_, class_names_, progress_);
  log_metrics(epoch_json);
  epoch_points_.push_back(point);
  plot_training_curves(path_in(out_dir_, "curves.png"), epoch_points_);
  std::fprintf(stderr, "epoch %lld/%lld: train loss %.4f  acc %.2f%% | %s | %s\n",
               (long long)progress_.epoch, (long long)total_epochs_, train_loss, 100 * train_acc,
               val_text.c_str(), format_duration(seconds_since(epoch_start_)).c_str());
  epoch_start_ = Clock::now();
}

// --- the end ----------------------------------------------------------------------------------

int Trainer::finish() {
  line_.finish();
  if (root_) {
    report_profile();
    if (saved_step_ != progress_.step) save_last_and_resume();
    if (!file_exists(best_path_)) save_checkpoint(best_path_, *model_, config_, class_names_, progress_);
  }
  // After rank 0's saves: a rank leaving with a stop status makes mpirun end the job, which
  // must not cut them short.
  check_replicas_agree();
  const int stop_signal = ranks_ == 1 ? int(g_stop_requested) : stop_signal_;
  if (!root_) return stop_requested() ? 128 + stop_signal : 0;
  if (stop_requested()) {
    std::fprintf(stderr, "stopped at step %lld of %lld; saved %s and %s. Continue with: minivit train --resume %s\n",
                 (long long)progress_.step, (long long)total_steps_, last_path_.c_str(),
                 resume_path_.c_str(), out_dir_.c_str());
    return 128 + stop_signal;
  }

  const SplitImages test_images = images_of_split(data_, Split::test, config_);
  const EvalResult test = evaluate(*model_, *eval_acts_, test_images.dataset, test_images.indices,
                                   config_.data.mean, config_.data.std);
  nlohmann::json report = eval_to_json(test, class_names_);
  report["split"] = "test";
  report["checkpoint"] = last_path_;
  report["step"] = progress_.step;
  nlohmann::json test_line = {{"type", "test"}, {"step", progress_.step}, {"test_loss", test.loss},
                              {"test_acc", test.top1}, {"test_top5", test.top5}};
  std::printf("test (last.safetensors, step %lld): top-1 %.2f%%  top-5 %.2f%%  loss %.4f  (%lld images)\n",
              (long long)progress_.step, 100 * test.top1, 100 * test.top5, test.loss, (long long)test.n);
  if (const ViT* averaged = averaged_model()) {
    const EvalResult ema = evaluate(*averaged, *eval_acts_, test_images.dataset,
                                    test_images.indices, config_.data.mean, config_.data.std);
    report["ema"] = eval_to_json(ema, class_names_);
    report["ema"]["checkpoint"] = ema_path_;
    test_line.update({{"test_loss_ema", ema.loss}, {"test_acc_ema", ema.top1}, {"test_top5_ema", ema.top5}});
    std::printf("test (ema.safetensors, step %lld): top-1 %.2f%%  top-5 %.2f%%  loss %.4f  (%lld images)\n",
                (long long)progress_.step, 100 * ema.top1, 100 * ema.top5, ema.loss, (long long)ema.n);
  }
  write_file_atomic(path_in(out_dir_, "eval.json"), report.dump(2) + "\n");
  const double img_per_s = batch_size_ * step_clock_.steps_per_second();
  test_line["train_img_per_s"] = img_per_s;
  log_metrics(test_line);
  std::printf("trained %lld steps in %s (%.0f img/s while training); run directory %s\n",
              (long long)progress_.step, format_duration(seconds_since(run_start_)).c_str(),
              img_per_s, out_dir_.c_str());
  return 0;
}

// Every rank took the same steps from the same state, so the replicas must agree bit for
// bit; a difference would be a bug, and the checkpoint rank 0 wrote would not be the model.
void Trainer::check_replicas_agree() const {
  if (ranks_ == 1) return;
  const uint64_t print = fingerprint(model_->weights.data(), model_->num_params);
  if (!distributed::same_on_all_ranks(print)) {
    if (!root_) throw distributed::ReportedByRoot();
    throw Error(strprintf("the %d ranks ended with different weights (rank 0: fingerprint %016llx); "
                          "please report this", ranks_, (unsigned long long)print));
  }
  if (root_)
    std::fprintf(stderr, "replicas: all %d ranks hold the same weights (fingerprint %016llx)\n",
                 ranks_, (unsigned long long)print);
}

// MINIVIT_MPI_PROFILE=1: where rank 0's step time went, for experiments/mpi.
void Trainer::report_profile() const {
  if (!profile_ || steps_here_ == 0) return;
  const distributed::AllreduceStats stats = distributed::allreduce_stats();
  const double n = double(steps_here_);
  std::fprintf(stderr,
               "mpi profile: %d ranks, %lld steps: compute %.3f ms/step, waiting for the slowest "
               "rank %.3f ms/step, gradient allreduce %.3f ms/step (%lld calls), %.0f gradient "
               "bytes per rank per step\n",
               ranks_, (long long)steps_here_, 1e3 * compute_seconds_ / n,
               1e3 * imbalance_seconds_ / n, 1e3 * reduce_seconds_ / n, (long long)stats.calls,
               double(model_->num_params) * sizeof(float));
}

// The model with the optimizer's moving average of the weights as its own, or nullptr when
// no average is kept (yet).
const ViT* Trainer::averaged_model() {
  if (!averaged_ || optimizer_->average_updates == 0) return nullptr;
  std::copy(optimizer_->average.data(), optimizer_->average.data() + model_->num_params,
            averaged_->weights.data());
  return &*averaged_;
}

// The average's validation figures for the epoch line of metrics.jsonl, also added to the
// epoch's summary line.
nlohmann::json Trainer::validate_average(std::string& val_text) {
  const ViT* averaged = averaged_model();
  if (!averaged) return nlohmann::json::object();
  const EvalResult val =
      evaluate(*averaged, *eval_acts_, data_.train, val_indices_, config_.data.mean,
               config_.data.std);
  averaged_val_top1_ = val.top1;
  val_text += strprintf(" | ema acc %.2f%%", 100 * val.top1);
  return {{"val_loss_ema", val.loss}, {"val_acc_ema", val.top1}};
}

void Trainer::save_last_and_resume() {
  save_checkpoint(last_path_, *model_, config_, class_names_, progress_);
  if (const ViT* averaged = averaged_model()) {
    // The figures of the average itself: the best so far are the weights', not its.
    TrainingProgress of_average = progress_;
    of_average.val_top1 = averaged_val_top1_;
    of_average.best_val_top1 = -1.0;
    of_average.best_step = -1;
    save_checkpoint(ema_path_, *averaged, config_, class_names_, of_average);
  }
  save_resume_state(resume_path_, *model_, *optimizer_, config_, progress_);
  saved_step_ = progress_.step;
}

void Trainer::log_metrics(const nlohmann::json& line) {
  metrics_ << line.dump() << "\n";
  metrics_.flush();
}

}  // namespace minivit
