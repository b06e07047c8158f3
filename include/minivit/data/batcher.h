#pragma once
// Training batches: which images each step sees (the epoch's order), their augmentation and
// target distributions, prepared one step ahead on a background thread so the model never
// waits for data. A batch is a pure function of (seed, step): the same on any thread count,
// with or without prefetching, and after a resume.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "minivit/core/config.h"
#include "minivit/core/tensor.h"
#include "minivit/data/data.h"
#include "minivit/data/dataset.h"

namespace minivit {

struct Batch {
  Tensor2 images;               // (B, C*S*S) normalised and augmented
  Tensor2 targets;              // (B, K) target distributions (smoothed, mixed)
  std::vector<int32_t> labels;  // (B) each image's own label, for accuracy
  Batch(int B, int64_t image_len, int K);
};

class TrainBatches {
 public:
  // `train_indices` index `data`; each epoch is a permutation of them (data.shuffle), cut
  // into steps_per_epoch batches of `B`; the remainder of an epoch is dropped.
  TrainBatches(const Dataset& data, std::vector<int64_t> train_indices, const Config& config,
               int64_t steps_per_epoch);

  // Fills `batch` with the batch of `step`. Single-threaded on purpose: it runs beside the
  // training step, whose threads should keep the cores.
  void make(int64_t step, Batch& batch);

  int batch_size() const { return B_; }
  int64_t image_len() const { return image_len_; }
  int classes() const { return K_; }

 private:
  const Dataset& data_;
  std::vector<int64_t> indices_;
  DataConfig data_config_;
  float label_smoothing_;
  uint64_t seed_;
  int B_, K_;
  int64_t image_len_, steps_per_epoch_;
  Normaliser normaliser_;
  int64_t order_epoch_ = -1;  // the epoch `order_` belongs to
  std::vector<int64_t> order_;
  std::vector<uint8_t> augment_scratch_;  // augment_image's pixels, one image at a time
};

// Runs `make(s + 1, batch)` on its own thread while step s trains.
class BatchPrefetcher {
 public:
  using MakeBatch = std::function<void(int64_t step, Batch& batch)>;
  BatchPrefetcher(MakeBatch make, int B, int64_t image_len, int K);
  explicit BatchPrefetcher(TrainBatches& source);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // The batch of `step`, valid until the next call; starts preparing step + 1. Rethrows
  // anything the background thread threw.
  const Batch& get(int64_t step);

 private:
  void request(int64_t step);  // caller holds mutex_
  void run();

  MakeBatch make_;
  Batch slots_[2];
  int64_t slot_step_[2] = {-1, -1};  // the step each slot holds or is being filled with
  bool slot_ready_[2] = {false, false};
  int64_t pending_ = -1;  // a step the worker should fill next, or -1
  bool quit_ = false;
  std::exception_ptr error_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread worker_;
};

}  // namespace minivit
