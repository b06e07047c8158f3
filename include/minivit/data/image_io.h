#pragma once
// Image files in, model input out: what `attention --image` and `predict` feed the model.
// A file (PNG, JPEG, BMP, TGA, GIF's first frame, ... whatever stb_image decodes) becomes
// a uint8 image (C, S, S) at the model's channel count and size, the layout Dataset keeps,
// and then goes through exactly the normalisation training used (fill_batch's).
#include <cstdint>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "minivit/core/config.h"

namespace minivit {

using Image8 = xt::xtensor<uint8_t, 3>;  // (C, S, S) planar, as Dataset stores images

struct LoadedImage {
  Image8 pixels;               // (C, S, S) at the model's channels and size
  int file_width = 0;          // as decoded, before resizing
  int file_height = 0;
  int file_channels = 0;       // channels stored in the file (1 grey, 2 grey+alpha, 3, 4)
};

// Limits checked on the header before any pixel is decoded, so a corrupt or malicious
// header cannot make us allocate gigabytes: sides of 1 .. 16384 and at most 2^26 pixels.
constexpr int kMaxImageSide = 16384;
constexpr int64_t kMaxImagePixels = int64_t(1) << 26;

// What an image file's header says, read without decoding the pixels.
struct ImageHeader {
  int width = 0;
  int height = 0;
  int channels = 0;  // stored in the file (1 grey, 2 grey+alpha, 3, 4)
};

// The building blocks of load_image_file, for loading many files in parallel (folder.h).
// They never throw, so they can run inside an OpenMP loop: each returns "" on success or
// why the file cannot be used, without the path (the caller puts it in front): "cannot
// open (...)", "not an image stb_image can read: ...", "image is WxH pixels, ...".
std::string read_image_header(const std::string& path, ImageHeader& header);

// Decodes `path` into `out`, planar (channels, height, width) uint8, with the channel
// conversion of load_image_file, resampling with stbir_resize_uint8 only when the file is
// not already width x height. Checks the header limits first. Never throws.
std::string decode_image(const std::string& path, int channels, int width, int height,
                         uint8_t* out);

// Decodes `path` and converts it for a model with `channels` channels (1 grey, 3 RGB; 2
// and 4 add alpha) of `size` x `size` pixels: stb_image converts grey <-> RGB (RGB -> grey
// is its integer luma (77 R + 150 G + 29 B) / 256; alpha is dropped for 1- and 3-channel
// models, not composited), and stbir_resize_uint8 resamples when the file is not already
// size x size (an image of the right size is used pixel for pixel). A non-square image is
// stretched to the square: models here are trained on whole square images, and cropping
// would hide parts of it. Throws minivit::Error naming the file: missing, not an image, or
// beyond the size limits above.
LoadedImage load_image_file(const std::string& path, int channels, int size);

// (C, S, S) uint8 -> float (C, S, S) = (pixel / 255 - mean[c]) / std[c], through
// fill_batch itself, so a file and the same image from the dataset give bit-identical input.
std::vector<float> normalise_image(const Image8& pixels, const std::vector<float>& mean,
                                   const std::vector<float>& std);

// The inverse, for showing the model's input: float (C, S, S) -> uint8, rounded and
// clamped to 0..255.
Image8 denormalise_image(const float* values, int channels, int size,
                         const std::vector<float>& mean, const std::vector<float>& std);

}  // namespace minivit
