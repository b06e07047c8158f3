#pragma once
// A dataset as a tree of PNG files, DIR/<split>/<class>/<index>.png, the layout that
// data.format = "folder" reads (folder.h); `minivit export` writes it.
//
// The tree is written under a temporary name beside DIR, flushed, and renamed to DIR at
// the end, so DIR either does not exist or holds the whole tree: an interrupted export leaves
// nothing to clean up by hand (its temporary tree is removed by the next one). The files
// themselves are written plainly: one flush for the whole tree instead of an fsync per file,
// which for 70,000 small files is the difference between seconds and minutes.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "minivit/data/dataset.h"

namespace minivit {

// Checks the tree's place before any data is read: `out_dir` must be new or an empty
// directory; its parent is created, and the temporary trees of killed exports beside it are
// removed. Throws minivit::Error naming `out_dir`.
void prepare_png_tree(const std::string& out_dir);

// One folder name per class of `data` (class_folder_name), all distinct; throws
// minivit::Error naming the two classes that would share one.
std::vector<std::string> class_folders_for(const Dataset& data);

struct PngTreeSplit {
  std::string name;  // "train" or "test": the top folder
  const Dataset* data = nullptr;
};

struct PngTreeProgress {
  std::string split;
  int64_t split_written = 0, split_images = 0;  // in this split
  int64_t written = 0, images = 0;              // in every split
};

// Writes `splits` into the tree at `out_dir` (prepared above), in parallel on the pool, and
// calls `progress` after each block of images. `source` names the data in messages (a label
// without a class). Throws minivit::Error naming the file that could not be written.
void write_png_tree(const std::string& out_dir, const std::vector<PngTreeSplit>& splits,
                    const std::vector<std::string>& class_folders, const std::string& source,
                    const std::function<void(const PngTreeProgress&)>& progress);

}  // namespace minivit
