#include "minivit/image_io.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include "minivit/data.h"
#include "minivit/error.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image.h>
#include <stb/stb_image_resize.h>
#pragma GCC diagnostic pop

namespace minivit {

constexpr int kMaxSide = 16384;

LoadedImage load_image_file(const std::string& path, int channels, int size) {
  if (channels < 1 || channels > 4)
    throw Error(path + ": image files can feed models of 1 to 4 channels, but model.channels = " +
                std::to_string(channels));
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw Error(path + ": no such image file");
  if (std::filesystem::is_directory(path, ec))
    throw Error(path + ": is a directory, expected an image file (PNG, JPEG, BMP, TGA)");

  LoadedImage out;
  // Check the size before decoding, so a corrupt header cannot make us allocate gigabytes.
  if (!stbi_info(path.c_str(), &out.file_width, &out.file_height, &out.file_channels))
    throw Error(path + ": cannot read as an image (" + stbi_failure_reason() +
                "); expected PNG, JPEG, BMP, TGA, GIF, PSD, HDR, PIC or PNM");
  if (out.file_width < 1 || out.file_height < 1 || out.file_width > kMaxSide ||
      out.file_height > kMaxSide)
    throw Error(path + ": image is " + std::to_string(out.file_width) + "x" +
                std::to_string(out.file_height) + " pixels, expected sides of 1 to " +
                std::to_string(kMaxSide));

  int w = 0, h = 0, stored = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> decoded(
      stbi_load(path.c_str(), &w, &h, &stored, channels), stbi_image_free);
  if (!decoded)
    throw Error(path + ": cannot decode image (" + stbi_failure_reason() + ")");

  // stb gives interleaved (h, w, channels); resize in that layout, then split the planes.
  std::vector<uint8_t> resized;
  const uint8_t* src = decoded.get();
  if (w != size || h != size) {
    resized.resize(size_t(size) * size * size_t(channels));
    if (!stbir_resize_uint8(src, w, h, 0, resized.data(), size, size, 0, channels))
      throw Error(path + ": resizing " + std::to_string(w) + "x" + std::to_string(h) + " to " +
                  std::to_string(size) + "x" + std::to_string(size) + " failed");
    src = resized.data();
  }
  out.pixels = Image8::from_shape({size_t(channels), size_t(size), size_t(size)});
  const size_t plane = size_t(size) * size;
  for (size_t i = 0; i < plane; ++i)
    for (int c = 0; c < channels; ++c) out.pixels.data()[size_t(c) * plane + i] = src[i * size_t(channels) + size_t(c)];
  return out;
}

std::vector<float> normalise_image(const Image8& pixels, const std::vector<float>& mean,
                                   const std::vector<float>& std) {
  const size_t C = pixels.shape(0), H = pixels.shape(1), W = pixels.shape(2);
  if (mean.size() != C || std.size() != C)
    throw Error("normalisation has " + std::to_string(mean.size()) + " means and " +
                std::to_string(std.size()) + " stds for a " + std::to_string(C) +
                "-channel image");
  // Through fill_batch itself rather than a copy of its arithmetic: the compiler may fuse
  // its multiply-add differently in another function, and the input must match training's
  // bit for bit.
  Dataset one;
  one.images = xt::xtensor<uint8_t, 4>::from_shape({1, C, H, W});
  std::copy_n(pixels.data(), pixels.size(), one.images.data());
  one.labels = {0};
  one.num_classes = 1;
  std::vector<float> out(C * H * W);
  const int64_t index = 0;
  int32_t label = 0;
  fill_batch(out.data(), &label, one, &index, 1, mean, std);
  return out;
}

Image8 denormalise_image(const float* values, int channels, int size,
                         const std::vector<float>& mean, const std::vector<float>& std) {
  Image8 out = Image8::from_shape({size_t(channels), size_t(size), size_t(size)});
  const size_t plane = size_t(size) * size;
  for (size_t c = 0; c < size_t(channels); ++c)
    for (size_t i = 0; i < plane; ++i) {
      const float v = (values[c * plane + i] * std[c] + mean[c]) * 255.0f;
      out.data()[c * plane + i] = uint8_t(std::clamp(std::lround(v), 0L, 255L));
    }
  return out;
}

}  // namespace minivit
