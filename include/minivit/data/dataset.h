#pragma once
// A labelled image set kept as uint8 in memory, as the files store it; normalisation to
// float happens per batch (see batcher.h). Legend: N images, C channels, H x W pixels.
#include <cstdint>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>

namespace minivit {

struct Dataset {
  xt::xtensor<uint8_t, 4> images;  // (N, C, H, W)
  std::vector<int32_t> labels;     // (N), each in [0, num_classes)
  int num_classes = 0;
  std::vector<std::string> class_names;  // num_classes entries

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int channels() const { return static_cast<int>(images.shape(1)); }
  int height() const { return static_cast<int>(images.shape(2)); }
  int width() const { return static_cast<int>(images.shape(3)); }
};

// The names of a model's num_classes outputs: `names` as the data source gave them, then
// "class_K" for each class past their end, as a model may have more classes than its data.
inline std::vector<std::string> class_names_for(std::vector<std::string> names,
                                                int num_classes) {
  for (int k = static_cast<int>(names.size()); k < num_classes; ++k)
    names.push_back("class_" + std::to_string(k));
  return names;
}

// Train and test splits of one data source. The validation split is carved from `train`
// by the trainer (val_fraction), not here.
struct DataSplits {
  Dataset train;
  Dataset test;
};

}  // namespace minivit
