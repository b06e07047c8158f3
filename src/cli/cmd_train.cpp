// `minivit train`: the command line turned into a training run (see train/trainer.h for
// the loop and the run directory it writes), on one process or, started by mpirun, on
// several ranks (train/distributed.h).
#include <cstdio>
#include <exception>
#include <filesystem>
#include <optional>
#include <utility>

#include "minivit/cli/commands.h"
#include "minivit/core/error.h"
#include "minivit/formats/config_file.h"
#include "minivit/train/distributed.h"
#include "minivit/train/trainer.h"

namespace minivit {

static TrainerOptions resolve(const TrainOptions& opt) {
  const bool resuming = !opt.resume_dir.empty();
  std::string config_path = opt.config_path;
  if (config_path.empty()) {
    if (!resuming) throw Error("--config: a config file is required (e.g. configs/fashion_mnist.toml)");
    config_path = (std::filesystem::path(opt.resume_dir) / "config.toml").string();
  }
  TrainerOptions resolved;
  resolved.config = load_config(config_path, opt.sets);
  resolved.config.train.out_dir = !opt.out_dir.empty() ? opt.out_dir
                                  : resuming          ? opt.resume_dir
                                                      : resolved.config.train.out_dir;
  resolved.config_path = config_path;
  resolved.resume_dir = opt.resume_dir;
  resolved.init_path = opt.init_path;
  return resolved;
}

// How a failure ends a job of several ranks. Setup runs no collective, so each rank fails or
// not by itself; then they agree: an error every rank met (a bad config key, a missing
// dataset) is printed by rank 0 alone, one met by other ranks only is printed by them, and
// every rank leaves with status 1, after a barrier that the reporting ranks reach only once
// their line is written: mpirun ends the whole job when the first rank exits non-zero, and
// could otherwise end a reporting rank before it printed. After setup, an error that all
// ranks meet alike (a non-finite loss) is rank 0's to print; any other ends the whole job at
// once.
int run_train(const TrainOptions& opt) {
  distributed::Session session;
  std::optional<Trainer> trainer;
  std::exception_ptr setup_error;
  try {
    trainer.emplace(resolve(opt));
  } catch (...) {
    if (distributed::ranks() == 1) throw;
    setup_error = std::current_exception();
  }
  if (distributed::ranks() > 1) {
    const distributed::SetupOutcome outcome = distributed::agree_on_setup(setup_error != nullptr);
    int status = 1;
    if (setup_error && (distributed::is_root() || !outcome.root_failed))
      status = report_error("minivit", setup_error);
    if (outcome.any_failed) {
      distributed::barrier();
      return status;
    }
  }
  try {
    return trainer->run();
  } catch (const distributed::ReportedByRoot&) {
    return 1;
  } catch (const std::exception& e) {
    if (distributed::ranks() == 1) throw;
    std::fprintf(stderr, "minivit: error (rank %d of %d): %s\n", distributed::rank(),
                 distributed::ranks(), e.what());
    distributed::abort_job(1);
  }
}

}  // namespace minivit
