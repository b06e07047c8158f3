#pragma once
// Model checkpoints (OUT/last.safetensors, OUT/best.safetensors) and the resume state
// (OUT/resume.safetensors). Checkpoints hold the weights under timm's names and shapes and,
// in __metadata__, everything eval/attention/predict/info need: the resolved config
// ("minivit.<section>.<key>"), class names, step, epoch, validation accuracy and a format
// version; the safetensors layer adds the checksum. The resume state holds the weights
// again with the optimiser moments and the position in the schedule, so resuming reads one
// file written in one atomic rename.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "minivit/core/config.h"
#include "minivit/formats/safetensors.h"
#include "minivit/model/optimizer.h"
#include "minivit/model/vit.h"

namespace minivit {

constexpr int kCheckpointFormatVersion = 1;

struct TrainingProgress {
  int64_t step = 0;   // optimiser steps taken
  int64_t epoch = 0;  // epochs completed
  double val_top1 = -1.0;  // of these weights, -1 when not measured
  double best_val_top1 = -1.0;
  int64_t best_step = -1;
  // Running sums of the epoch in progress, so a resumed epoch reports the same figures.
  double epoch_loss_sum = 0.0;
  int64_t epoch_correct = 0;
  int64_t epoch_seen = 0;
};

void save_checkpoint(const std::string& path, const ViT& model, const Config& config,
                     const std::vector<std::string>& class_names,
                     const TrainingProgress& progress);

struct Checkpoint {
  Config config;
  std::vector<std::string> class_names;
  TrainingProgress progress;
  std::map<std::string, std::string> metadata;
  std::unique_ptr<ViT> model;
};

// Reads a minivit checkpoint: rebuilds the config from the metadata and the model from the
// tensors. Throws minivit::Error naming the file and what is wrong.
Checkpoint load_checkpoint(const std::string& path);
// Same, from a safetensors file already read (`path` names it in messages).
Checkpoint checkpoint_from_safetensors(SafetensorsFile file, const std::string& path);

// Copies weights from a safetensors file into `model`, requiring exactly the model's tensor
// names with the model's shapes; the first missing, unexpected or misshapen tensor is named.
void load_weights(ViT& model, const SafetensorsFile& file, const std::string& path);

void save_resume_state(const std::string& path, const ViT& model, const Optimizer& optimizer,
                       const Config& config, const TrainingProgress& progress);

// Restores weights, optimiser moments and progress; checks the architecture matches, naming
// the first model key that differs. The config the run was started with goes to
// `saved_config` when given.
TrainingProgress load_resume_state(const std::string& path, ViT& model, Optimizer& optimizer,
                                   Config* saved_config = nullptr);

}  // namespace minivit
