#include "minivit/data/batcher.h"

#include "minivit/data/augment.h"
#include "minivit/nn/cross_entropy.h"

namespace minivit {

Batch::Batch(int B, int64_t image_len, int K)
    : images(Tensor2::from_shape({size_t(B), size_t(image_len)})),
      targets(Tensor2::from_shape({size_t(B), size_t(K)})),
      labels(static_cast<size_t>(B)) {}

TrainBatches::TrainBatches(const Dataset& data, std::vector<int64_t> train_indices,
                           const Config& config, int64_t steps_per_epoch)
    : data_(data),
      indices_(std::move(train_indices)),
      data_config_(config.data),
      label_smoothing_(config.optim.label_smoothing),
      seed_(config.train.seed),
      B_(config.train.batch_size),
      K_(config.model.num_classes),
      image_len_(int64_t(data.channels()) * data.height() * data.width()),
      steps_per_epoch_(steps_per_epoch),
      normaliser_(config.data.mean, config.data.std),
      augment_scratch_(size_t(augment_scratch_bytes(data.channels(), data.height(),
                                                    data.width()))) {}

void TrainBatches::make(int64_t step, Batch& batch) {
  const int64_t epoch = step / steps_per_epoch_;
  if (epoch != order_epoch_) {
    order_ = epoch_order(indices_, data_config_.shuffle, seed_, epoch);
    order_epoch_ = epoch;
  }
  const int64_t* chosen = order_.data() + (step % steps_per_epoch_) * B_;
  const int C = data_.channels(), H = data_.height(), W = data_.width();
  const bool augments = data_config_.augments();
  for (int b = 0; b < B_; ++b) {
    const uint8_t* src = data_.images.data() + chosen[b] * image_len_;
    float* dst = batch.images.data() + int64_t(b) * image_len_;
    if (augments)
      augment_image(dst, src, C, H, W, normaliser_.scale.data(), normaliser_.shift.data(),
                    draw_image_augment(data_config_, H, W, seed_, step, b),
                    augment_scratch_.data());
    else
      normaliser_.apply(dst, src, C, int64_t(H) * W);
    batch.labels[size_t(b)] = data_.labels[size_t(chosen[b])];
  }
  make_targets(batch.targets.data(), batch.labels.data(), B_, K_, label_smoothing_);
  apply_batch_mix(batch.images.data(), batch.targets.data(), B_, C, H, W, K_,
                  draw_batch_mix(data_config_, H, W, seed_, step));
}

BatchPrefetcher::BatchPrefetcher(MakeBatch make, int B, int64_t image_len, int K)
    : make_(std::move(make)),
      slots_{Batch(B, image_len, K), Batch(B, image_len, K)},
      worker_([this] { run(); }) {}

BatchPrefetcher::BatchPrefetcher(TrainBatches& source)
    : BatchPrefetcher([&source](int64_t step, Batch& batch) { source.make(step, batch); },
                      source.batch_size(), source.image_len(), source.classes()) {}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void BatchPrefetcher::request(int64_t step) {
  const int slot = int(step % 2);
  slot_step_[slot] = step;
  slot_ready_[slot] = false;
  pending_ = step;
  changed_.notify_all();
}

const Batch& BatchPrefetcher::get(int64_t step) {
  std::unique_lock<std::mutex> lock(mutex_);
  const int slot = int(step % 2);
  if (slot_step_[slot] != step) {
    // Not the step prefetched (the first call, or a jump): wait for the worker to finish
    // whatever it is filling, then ask for this one.
    changed_.wait(lock, [&] { return pending_ < 0 || error_; });
    if (!error_) request(step);
  }
  changed_.wait(lock, [&] { return slot_ready_[slot] || error_; });
  if (error_) std::rethrow_exception(error_);
  // The other slot held step - 1, which the caller has finished with.
  changed_.wait(lock, [&] { return pending_ < 0 || error_; });
  if (error_) std::rethrow_exception(error_);
  request(step + 1);
  return slots_[slot];
}

void BatchPrefetcher::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return quit_ || pending_ >= 0; });
    if (quit_) return;
    const int64_t step = pending_;
    const int slot = int(step % 2);
    lock.unlock();
    std::exception_ptr error;
    try {
      make_(step, slots_[slot]);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error) error_ = error;
    slot_ready_[slot] = true;
    pending_ = -1;
    changed_.notify_all();
  }
}

}  // namespace minivit
