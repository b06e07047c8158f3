// `minivit train`: the training loop, checkpoints, metrics, curves and the final test
// evaluation, laid out in the run directory as the contract describes.
#include <csignal>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "minivit/cli/commands.h"
#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/core/progress.h"
#include "minivit/core/rng.h"
#include "minivit/data/batcher.h"
#include "minivit/data/data.h"
#include "minivit/formats/checkpoint.h"
#include "minivit/formats/config_file.h"
#include "minivit/inspect/plot.h"
#include "minivit/kernels/runtime.h"
#include "minivit/kernels/threads.h"
#include "minivit/model/train_step.h"
#include "minivit/nn/cross_entropy.h"
#include "minivit/train/evaluate.h"

namespace minivit {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// SIGINT/SIGTERM ask the loop to stop after the current step and save; a second SIGINT
// leaves at once (every file is written by atomic rename, so nothing is left half-written).
static volatile std::sig_atomic_t g_stop_requested = 0;

static void on_stop_signal(int sig) {
  if (g_stop_requested) ::_exit(128 + sig);
  g_stop_requested = sig;
}

static std::string path_in(const std::string& dir, const char* name) {
  return (fs::path(dir) / name).string();
}

// Lines of metrics.jsonl that belong to steps up to `step` (a resumed run rewrites the
// rest). Lines that do not parse (a crash mid-append) are dropped.
static std::string metrics_up_to(const std::string& path, int64_t step,
                                 std::vector<EpochPoint>& epochs) {
  std::string kept;
  if (!file_exists(path)) return kept;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step")) continue;
    if (j["step"].get<int64_t>() > step) continue;
    if (j.value("type", "") == "epoch") {
      auto num = [&](const char* k) {
        return j.contains(k) && j[k].is_number() ? j[k].get<double>() : NAN;
      };
      epochs.push_back({j["epoch"].get<int>(), num("train_loss"), num("train_acc"),
                        num("val_loss"), num("val_acc")});
    }
    kept += line + "\n";
  }
  return kept;
}

// A resumed run matches an uninterrupted one only under the config it was started with;
// a changed key (more epochs, another learning rate) is allowed, but said, as the
// continuation then takes another path. Keys that only steer output are left out.
static void warn_about_changed_keys(const Config& started_with, const Config& now) {
  const auto before = config_to_flat(started_with), after = config_to_flat(now);
  for (size_t i = 0; i < before.size() && i < after.size(); ++i) {
    const std::string& key = before[i].first;
    if (key == "train.out_dir" || key == "train.log_every") continue;
    if (before[i].second != after[i].second)
      std::fprintf(stderr, "note: resuming with %s = %s; the run was started with %s = %s, so it "
                           "will not match an uninterrupted run\n",
                   key.c_str(), after[i].second.c_str(), key.c_str(), before[i].second.c_str());
  }
}

int run_train(const TrainOptions& opt) {
  // --- configuration -------------------------------------------------------------------
  const bool resuming = !opt.resume_dir.empty();
  std::string config_path = opt.config_path;
  if (config_path.empty()) {
    if (!resuming) throw Error("--config: a config file is required (e.g. configs/fashion_mnist.toml)");
    config_path = path_in(opt.resume_dir, "config.toml");
  }
  Config config = load_config(config_path, opt.sets);
  std::string out_dir = !opt.out_dir.empty() ? opt.out_dir
                        : resuming          ? opt.resume_dir
                                            : config.train.out_dir;
  config.train.out_dir = out_dir;
  const std::string resume_path = path_in(resuming ? opt.resume_dir : out_dir, "resume.safetensors");
  if (resuming && !file_exists(resume_path))
    throw Error(resume_path + ": no resume state here; is --resume the run directory of an earlier `minivit train`?");
  ensure_writable_dir(out_dir);
  remove_stale_temporaries(out_dir);  // left by a run that was killed mid-write
  if (!resuming && file_exists(path_in(out_dir, "resume.safetensors")))
    throw Error(out_dir + ": already holds a training run; continue it with --resume " + out_dir +
                " or choose another --out");
  check_vit_fits_memory(config.model, config.train.batch_size, true);
  const int threads = set_num_threads(config.train.threads);

  // --- data ------------------------------------------------------------------------------
  DataSplits data = load_data(config.data, config.model);
  check_data_fits_model(data.train, config.model, config.data.path + " (train split)");
  check_data_fits_model(data.test, config.model, config.data.path + " (test split)");
  const TrainValSplit split =
      split_train_val(data.train.size(), config.data.val_fraction, config.train.seed);
  std::vector<std::string> class_names = data.train.class_names;
  for (int k = int(class_names.size()); k < config.model.num_classes; ++k)
    class_names.push_back("class_" + std::to_string(k));
  const int B = config.train.batch_size;
  const int64_t steps_per_epoch = int64_t(split.train.size()) / B;
  if (steps_per_epoch == 0)
    throw Error("train.batch_size: " + std::to_string(B) + " is larger than the " +
                std::to_string(split.train.size()) + " training images");
  const int64_t total_steps = config.train.max_steps > 0 ? config.train.max_steps
                                                         : config.train.epochs * steps_per_epoch;
  const int64_t total_epochs = (total_steps + steps_per_epoch - 1) / steps_per_epoch;

  // --- model and optimiser -------------------------------------------------------------
  ViT model(config.model);
  model.init(config.train.seed);
  Optimizer optimizer(config.optim, model.num_params);
  TrainingProgress progress;
  if (resuming) {
    Config started_with;
    progress = load_resume_state(resume_path, model, optimizer, &started_with);
    warn_about_changed_keys(started_with, config);
    if (progress.step > total_steps)
      throw Error(resume_path + ": the run is already at step " + std::to_string(progress.step) +
                  ", past the configured " + std::to_string(total_steps) + " steps");
  } else if (!opt.init_path.empty()) {
    load_weights(model, read_safetensors(opt.init_path), opt.init_path);
  }
  Activations acts(config.model, B, true);

  write_file_atomic(path_in(out_dir, "config.toml"), config_to_toml(config));
  const std::string metrics_path = path_in(out_dir, "metrics.jsonl");
  std::vector<EpochPoint> epoch_points;
  write_file_atomic(metrics_path, metrics_up_to(metrics_path, resuming ? progress.step : -1, epoch_points));
  std::ofstream metrics(metrics_path, std::ios::app);
  auto log_json = [&](const nlohmann::json& j) {
    metrics << j.dump() << "\n";
    metrics.flush();
  };

  std::fprintf(stderr,
               "minivit train: %s | %lld params | %lld train / %lld val / %lld test images | "
               "%lld steps (%lld epochs of %lld) | batch %d | %d threads | out %s%s\n",
               config_path.c_str(), (long long)model.num_params, (long long)split.train.size(),
               (long long)split.val.size(), (long long)data.test.size(), (long long)total_steps,
               (long long)total_epochs, (long long)steps_per_epoch, B, threads, out_dir.c_str(),
               resuming ? strprintf(" | resuming at step %lld", (long long)progress.step).c_str() : "");

  if (const std::string advice = blas_kernel_advice(); !advice.empty())
    std::fprintf(stderr, "%s\n", advice.c_str());
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);

  // --- the loop -----------------------------------------------------------------------
  TrainBatches batches(data.train, split.train, config, steps_per_epoch);
  BatchPrefetcher prefetcher(batches);
  ProgressLine line;
  const auto run_start = Clock::now();
  double train_seconds = 0.0;
  int64_t trained_images = 0;
  double window_loss = 0.0;
  int64_t window_correct = 0, window_seen = 0;
  int64_t saved_step = resuming ? progress.step : -1;
  const std::string last_path = path_in(out_dir, "last.safetensors");
  const std::string best_path = path_in(out_dir, "best.safetensors");

  auto save_all = [&]() {
    save_checkpoint(last_path, model, config, class_names, progress);
    save_resume_state(resume_path, model, optimizer, config, progress);
    saved_step = progress.step;
  };

  while (progress.step < total_steps && !g_stop_requested) {
    const int64_t epoch = progress.step / steps_per_epoch;
    const auto epoch_start = Clock::now();
    for (int64_t pos = progress.step % steps_per_epoch;
         pos < steps_per_epoch && progress.step < total_steps && !g_stop_requested; ++pos) {
      const auto t0 = Clock::now();
      const Batch& batch = prefetcher.get(progress.step);
      const float lr = learning_rate(config.optim, progress.step, total_steps);
      const StepResult r = train_step(model, acts, optimizer, batch.images.data(),
                                      batch.targets.data(), batch.labels.data(), B, lr,
                                      config.optim.clip_grad_norm,
                                      rng_key(config.train.seed, kRngDropout, uint64_t(progress.step)));
      if (!r.finite) {
        line.finish();
        std::string culprit = first_nonfinite_grad(model);
        throw Error(strprintf("step %lld: the loss is %g and the gradient norm %g", (long long)progress.step,
                        double(r.loss), r.grad_norm) +
                    (culprit.empty() ? "" : "; first non-finite gradient in '" + culprit + "'") +
                    (saved_step >= 0 ? "; the last good checkpoint is " + last_path + " (step " +
                                           std::to_string(saved_step) + ")"
                                     : "; no checkpoint was written yet") +
                    ". Usual causes: optim.lr too high, no optim.clip_grad_norm, too short optim.warmup_steps");
      }
      ++progress.step;
      train_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      trained_images += B;
      progress.epoch_loss_sum += double(r.loss) * B;
      progress.epoch_correct += r.correct;
      progress.epoch_seen += B;
      window_loss += double(r.loss) * B;
      window_correct += r.correct;
      window_seen += B;

      const double img_per_s = trained_images / std::max(train_seconds, 1e-9);
      const double eta = (total_steps - progress.step) * B / img_per_s;
      const bool log_now = progress.step % config.train.log_every == 0 || progress.step == total_steps;
      if (log_now) {
        log_json({{"type", "step"}, {"step", progress.step}, {"epoch", epoch + 1},
                  {"loss", window_loss / window_seen},
                  {"acc", double(window_correct) / window_seen}, {"lr", lr},
                  {"grad_norm", r.grad_norm}, {"img_per_s", img_per_s},
                  {"time", std::chrono::duration<double>(Clock::now() - run_start).count()}});
      }
      if (line.is_terminal() || log_now) {
        line.update(strprintf("epoch %lld/%lld  step %lld/%lld  loss %.4f  acc %5.1f%%  lr %.2e  %.0f img/s  ETA %s",
                        (long long)epoch + 1, (long long)total_epochs, (long long)progress.step,
                        (long long)total_steps, window_loss / window_seen,
                        100.0 * window_correct / window_seen, double(lr), img_per_s,
                        format_duration(eta).c_str()));
      }
      if (log_now) window_loss = 0.0, window_correct = 0, window_seen = 0;
    }
    const bool epoch_done = progress.step % steps_per_epoch == 0 || progress.step == total_steps;
    if (!epoch_done) break;  // stopped by a signal mid-epoch

    // --- end of epoch: validate, checkpoint, plot ---------------------------------------
    line.finish();
    progress.epoch = epoch + 1;
    const double train_loss = progress.epoch_loss_sum / std::max<int64_t>(progress.epoch_seen, 1);
    const double train_acc = double(progress.epoch_correct) / std::max<int64_t>(progress.epoch_seen, 1);
    progress.epoch_loss_sum = 0.0, progress.epoch_correct = 0, progress.epoch_seen = 0;
    nlohmann::json epoch_json = {{"type", "epoch"}, {"epoch", progress.epoch}, {"step", progress.step},
                                 {"train_loss", train_loss}, {"train_acc", train_acc}};
    EpochPoint point{int(progress.epoch), train_loss, train_acc, NAN, NAN};
    std::string val_text = "no validation split";
    bool is_best = false;
    const bool validate_now = progress.epoch % config.train.eval_every == 0 || progress.step == total_steps;
    if (!split.val.empty() && validate_now) {
      const EvalResult val = evaluate(model, acts, data.train, split.val, config.data.mean, config.data.std);
      progress.val_top1 = val.top1;
      is_best = val.top1 > progress.best_val_top1;
      if (is_best) progress.best_val_top1 = val.top1, progress.best_step = progress.step;
      epoch_json["val_loss"] = val.loss;
      epoch_json["val_acc"] = val.top1;
      point.val_loss = val.loss;
      point.val_acc = val.top1;
      val_text = strprintf("val loss %.4f  acc %.2f%%%s", val.loss, 100 * val.top1, is_best ? " (best)" : "");
    } else if (split.val.empty()) {
      is_best = true;  // without a validation split the latest weights are the best we know
      progress.best_step = progress.step;
    } else {
      val_text = "validation every " + std::to_string(config.train.eval_every) + " epochs";
    }
    epoch_json["time"] = std::chrono::duration<double>(Clock::now() - run_start).count();
    save_all();
    if (is_best) save_checkpoint(best_path, model, config, class_names, progress);
    log_json(epoch_json);
    epoch_points.push_back(point);
    plot_training_curves(path_in(out_dir, "curves.png"), epoch_points);
    std::fprintf(stderr, "epoch %lld/%lld: train loss %.4f  acc %.2f%% | %s | %s\n",
                 (long long)progress.epoch, (long long)total_epochs, train_loss, 100 * train_acc,
                 val_text.c_str(),
                 format_duration(std::chrono::duration<double>(Clock::now() - epoch_start).count()).c_str());
  }
  line.finish();

  if (saved_step != progress.step) save_all();
  if (!file_exists(best_path)) save_checkpoint(best_path, model, config, class_names, progress);
  if (g_stop_requested) {
    std::fprintf(stderr, "stopped at step %lld of %lld; saved %s and %s. Continue with: minivit train --resume %s\n",
                 (long long)progress.step, (long long)total_steps, last_path.c_str(),
                 resume_path.c_str(), out_dir.c_str());
    return 128 + int(g_stop_requested);
  }

  // --- final evaluation on the test split -----------------------------------------------
  std::vector<int64_t> test_indices(static_cast<size_t>(data.test.size()));
  for (size_t i = 0; i < test_indices.size(); ++i) test_indices[i] = int64_t(i);
  const EvalResult test = evaluate(model, acts, data.test, test_indices, config.data.mean, config.data.std);
  nlohmann::json report = eval_to_json(test, class_names);
  report["split"] = "test";
  report["checkpoint"] = last_path;
  report["step"] = progress.step;
  write_file_atomic(path_in(out_dir, "eval.json"), report.dump(2) + "\n");
  log_json({{"type", "test"}, {"step", progress.step}, {"test_loss", test.loss},
            {"test_acc", test.top1}, {"test_top5", test.top5}});
  const double wall = std::chrono::duration<double>(Clock::now() - run_start).count();
  std::printf("test (last.safetensors, step %lld): top-1 %.2f%%  top-5 %.2f%%  loss %.4f  (%lld images)\n",
              (long long)progress.step, 100 * test.top1, 100 * test.top5, test.loss, (long long)test.n);
  std::printf("trained %lld steps in %s (%.0f img/s while training); run directory %s\n",
              (long long)progress.step, format_duration(wall).c_str(),
              trained_images / std::max(train_seconds, 1e-9), out_dir.c_str());
  return 0;
}

}  // namespace minivit
