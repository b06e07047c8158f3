#pragma once
// From a data config to batches: which loader reads the files, how the validation split is
// carved out of training, the order of each epoch, and the uint8 -> float conversion that
// normalises a batch with the configured mean and std.
#include <cstdint>
#include <string>
#include <vector>

#include "minivit/core/config.h"
#include "minivit/data/dataset.h"

namespace minivit {

// Reads the train and test splits that `data.format` and `data.path` name. Applies
// data.class_names when given. The model config gives the channels and image size that a
// folder of images is converted to. Throws minivit::Error naming the path on any problem.
DataSplits load_data(const DataConfig& data, const ModelConfig& model);

// Throws unless the images fit the model: channels, image size, labels < num_classes.
void check_data_fits_model(const Dataset& data, const ModelConfig& model,
                           const std::string& what);

// Training and validation indices into the train split: a seeded permutation of all
// images, the last round(val_fraction * n) of it for validation, both lists sorted so that
// an unshuffled run reads images in file order.
struct TrainValSplit {
  std::vector<int64_t> train;
  std::vector<int64_t> val;
};
TrainValSplit split_train_val(int64_t n, float val_fraction, uint64_t seed);

// The order of one epoch: a permutation of `indices` drawn from (seed, epoch), or the
// indices as they are when !shuffle.
std::vector<int64_t> epoch_order(const std::vector<int64_t>& indices, bool shuffle,
                                 uint64_t seed, int64_t epoch);

// pixel -> (pixel / 255 - mean[c]) / std[c], computed as pixel * scale[c] + shift[c]; the
// one place that arithmetic lives, so training, evaluation and image files agree bit for bit.
struct Normaliser {
  std::vector<float> scale, shift;  // (C)
  Normaliser(const std::vector<float>& mean, const std::vector<float>& std);
  // dst (C, plane) = normalised src (C, plane)
  void apply(float* dst, const uint8_t* src, int C, int64_t plane) const;
};

// images (B, C, S, S) = (pixel / 255 - mean[c]) / std[c]; labels (B).
void fill_batch(float* images, int32_t* labels, const Dataset& data, const int64_t* indices,
                int B, const std::vector<float>& mean, const std::vector<float>& std);

}  // namespace minivit
