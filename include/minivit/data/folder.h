#pragma once
// Image folders as a dataset (data.format = "folder"): one sub-folder per class, image
// files inside, in either of two layouts under data.path:
//
//   PATH/train/<class>/<image>  and  PATH/test/<class>/<image>   two splits, as given
//   PATH/<class>/<image>                                          one tree, split here
//
// The two-split layout is used when PATH/train is a directory; PATH/test must then exist,
// and no other folder may sit beside them (a stray `val/` would otherwise be ignored
// silently). Regular files beside the class folders (README, LICENSE, ...) are ignored.
//
// Classes are the class folders' names sorted bytewise; a label is the index in that order.
// In the two-split layout the class list is train's, and every class folder of test must
// also exist in train (labels follow train's list; a test class may be missing).
//
// One tree: its images become the train split, and the test split is carved from it with a
// FIXED seed (not train.seed), so every run, and `eval` later, sees the same test images.
// The carve is stratified: of a class's n_k images (in file order) a seeded permutation
// picks t_k for test, with t_k = round(f * (n_1 + ... + n_k)) - round(f * (n_1 + ... +
// n_k-1)) and f = data.val_fraction, so the test split holds round(f * n) images in all
// and each class about f of its own (fewer only where a class would give up its last
// image: it never does). The draw is keyed by the class name, so a class keeps its test
// images when other classes come or go. The trainer then carves its validation split from
// the remaining train images as usual (val_fraction = 0.1: 10% test, 9% validation, 81%
// training; val_fraction = 0 leaves the test split empty, which the trainer refuses).
//
// Files: anything stb_image decodes (PNG, JPEG, BMP, TGA, GIF's first frame, PNM, PSD, HDR,
// PIC), whatever its name. Names starting with '.' are skipped at every level (class
// folders and files). Every other entry of a class folder must be a regular file that
// decodes: a sub-folder is an error, not skipped, so nested images are never silently
// left out. Files are taken in sorted name order within a class, classes in label order.
//
// Conversion: to `channels` (stb_image's grey <-> RGB conversion, see image_io.h); with
// `resize`, to image_size x image_size (an image of that size is used pixel for pixel);
// without it every image must already have the size of the first image (the first one of
// the train split, in the order above).
//
// Errors, one line naming the path: missing path, not a directory, no class folders, an
// empty class folder, a file that is not an image ("not an image stb_image can read:
// ..."), an image beyond the limits of image_io.h (checked on the header before decoding),
// or of the wrong size without `resize`. Decoding runs in parallel on the OpenMP pool; the
// result, and which error is reported (the first file in the order above), do not depend
// on the thread count. Prints nothing.
#include <string>

#include "minivit/data/dataset.h"

namespace minivit {

DataSplits load_folder_dataset(const std::string& path, int channels, int image_size,
                               bool resize, float test_fraction);

// The folder name a class gets when a dataset is written as such a tree (`minivit export`):
// '/', '\\', control characters and the characters Windows forbids (<>:"|?*) become '_',
// as does a leading '.' (hidden, so it would be skipped); an empty name becomes "_".
// Fashion-MNIST's "T-shirt/top" -> "T-shirt_top".
std::string class_folder_name(const std::string& class_name);

}  // namespace minivit
