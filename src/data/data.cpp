#include "minivit/data/data.h"

#include <algorithm>
#include <cmath>

#include "minivit/core/error.h"
#include "minivit/core/rng.h"
#include "minivit/data/cifar.h"
#include "minivit/data/folder.h"
#include "minivit/data/idx.h"

namespace minivit {

DataSplits load_data(const DataConfig& data, const ModelConfig& model) {
  DataSplits splits;
  switch (data.format) {
    case DataFormat::idx:
      splits = load_idx_dir(data.path);
      break;
    case DataFormat::cifar10:
      splits = load_cifar10_dir(data.path);
      break;
    case DataFormat::cifar100:
      splits = load_cifar100_dir(data.path, data.label);
      break;
    case DataFormat::folder:
      splits = load_folder_dataset(data.path, model.channels, model.image_size, data.resize,
                                   data.val_fraction);
      break;
  }
  if (!data.class_names.empty()) {
    if (int(data.class_names.size()) < splits.train.num_classes)
      throw Error("data.class_names: " + std::to_string(data.class_names.size()) +
                  " names given, but " + data.path + " has " +
                  std::to_string(splits.train.num_classes) + " classes");
    for (Dataset* d : {&splits.train, &splits.test}) {
      d->class_names = data.class_names;
      d->num_classes = int(data.class_names.size());
    }
  }
  return splits;
}

void check_data_fits_model(const Dataset& data, const ModelConfig& model,
                           const std::string& what) {
  if (data.channels() != model.channels)
    throw Error(what + ": images have " + std::to_string(data.channels()) +
                " channel(s), but model.channels = " + std::to_string(model.channels));
  if (data.height() != model.image_size || data.width() != model.image_size)
    throw Error(what + ": images are " + std::to_string(data.height()) + "x" +
                std::to_string(data.width()) + ", but model.image_size = " +
                std::to_string(model.image_size));
  if (data.num_classes > model.num_classes)
    throw Error(what + ": labels go up to " + std::to_string(data.num_classes - 1) +
                ", but model.num_classes = " + std::to_string(model.num_classes));
  if (data.size() == 0) throw Error(what + ": holds no images");
}

TrainValSplit split_train_val(int64_t n, float val_fraction, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
  const uint64_t key = rng_key(seed, kRngValSplit);
  for (int64_t i = n - 1; i > 0; --i)  // Fisher-Yates
    std::swap(order[size_t(i)], order[size_t(rng_u64(key, uint64_t(i)) % uint64_t(i + 1))]);
  const int64_t n_val = std::llround(double(val_fraction) * double(n));
  TrainValSplit split;
  split.train.assign(order.begin(), order.end() - n_val);
  split.val.assign(order.end() - n_val, order.end());
  std::sort(split.train.begin(), split.train.end());
  std::sort(split.val.begin(), split.val.end());
  return split;
}

std::vector<int64_t> epoch_order(const std::vector<int64_t>& indices, bool shuffle,
                                 uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order = indices;
  if (!shuffle) return order;
  const uint64_t key = rng_key(seed, kRngDataOrder, uint64_t(epoch));
  for (size_t i = order.size(); i-- > 1;)
    std::swap(order[i], order[size_t(rng_u64(key, i) % uint64_t(i + 1))]);
  return order;
}

Normaliser::Normaliser(const std::vector<float>& mean, const std::vector<float>& std) {
  for (size_t c = 0; c < mean.size() && c < std.size(); ++c) {
    scale.push_back(1.0f / (255.0f * std[c]));
    shift.push_back(-mean[c] / std[c]);
  }
}

void Normaliser::apply(float* dst, const uint8_t* src, int C, int64_t plane) const {
  for (int c = 0; c < C; ++c) {
    const float a = scale[size_t(c)], b = shift[size_t(c)];
    for (int64_t i = 0; i < plane; ++i) dst[c * plane + i] = float(src[c * plane + i]) * a + b;
  }
}

void fill_batch(float* images, int32_t* labels, const Dataset& data, const int64_t* indices,
                int B, const std::vector<float>& mean, const std::vector<float>& std) {
  const int C = data.channels();
  const int64_t plane = int64_t(data.height()) * data.width();
  const int64_t image_len = C * plane;
  const Normaliser normaliser(mean, std);
#pragma omp parallel for schedule(static) if (B >= 32)
  for (int b = 0; b < B; ++b) {
    normaliser.apply(images + int64_t(b) * image_len, data.images.data() + indices[b] * image_len,
                     C, plane);
    labels[b] = data.labels[size_t(indices[b])];
  }
}

}  // namespace minivit
