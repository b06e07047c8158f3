#include "minivit/data/image_io.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>

#include "minivit/core/error.h"
#include "minivit/data/data.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image.h>
#include <stb/stb_image_resize.h>
#pragma GCC diagnostic pop

namespace minivit {

namespace {

using FileHandle = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

std::string stb_reason() {
  const char* reason = stbi_failure_reason();
  return reason ? reason : "unknown reason";
}

std::string size_error(const ImageHeader& header) {
  if (header.width >= 1 && header.height >= 1 && header.width <= kMaxImageSide &&
      header.height <= kMaxImageSide && int64_t(header.width) * header.height <= kMaxImagePixels)
    return "";
  return "image is " + std::to_string(header.width) + "x" + std::to_string(header.height) +
         " pixels, expected sides of 1 to " + std::to_string(kMaxImageSide) + " and at most " +
         std::to_string(kMaxImagePixels) + " pixels";
}

// Opens `path` and reads its header; on failure `error` says why and the handle is null.
FileHandle open_image(const std::string& path, ImageHeader& header, std::string& error) {
  FileHandle file(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!file) {
    error = std::string("cannot open (") + std::strerror(errno) + ")";
    return file;
  }
  // stbi_info_from_file returns to the start of the file, so stbi_load_from_file can follow.
  if (!stbi_info_from_file(file.get(), &header.width, &header.height, &header.channels))
    error = "not an image stb_image can read: " + stb_reason();
  else
    error = size_error(header);
  if (!error.empty()) file.reset();
  return file;
}

}  // namespace

std::string read_image_header(const std::string& path, ImageHeader& header) {
  std::string error;
  open_image(path, header, error);
  return error;
}

std::string decode_image(const std::string& path, int channels, int width, int height,
                         uint8_t* out) {
  if (channels < 1 || channels > 4)
    return "cannot convert to " + std::to_string(channels) + " channels, expected 1 to 4";
  try {  // an allocation failure must not leave an OpenMP region as an exception
    ImageHeader header;
    std::string error;
    FileHandle file = open_image(path, header, error);
    if (!file) return error;
    int w = 0, h = 0, stored = 0;
    std::unique_ptr<stbi_uc, void (*)(void*)> decoded(
        stbi_load_from_file(file.get(), &w, &h, &stored, channels), stbi_image_free);
    if (!decoded) return "damaged image, stb_image cannot decode it: " + stb_reason();

    // stb gives interleaved (h, w, channels); resize in that layout, then split the planes.
    std::vector<uint8_t> resized;
    const uint8_t* src = decoded.get();
    if (w != width || h != height) {
      resized.resize(size_t(width) * size_t(height) * size_t(channels));
      if (!stbir_resize_uint8(src, w, h, 0, resized.data(), width, height, 0, channels))
        return "resizing " + std::to_string(w) + "x" + std::to_string(h) + " to " +
               std::to_string(width) + "x" + std::to_string(height) + " failed";
      src = resized.data();
    }
    const size_t plane = size_t(width) * size_t(height);
    for (size_t i = 0; i < plane; ++i)
      for (size_t c = 0; c < size_t(channels); ++c) out[c * plane + i] = src[i * size_t(channels) + c];
    return "";
  } catch (const std::bad_alloc&) {
    return "out of memory while decoding";
  }
}

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
  ImageHeader header;
  if (!stbi_info(path.c_str(), &header.width, &header.height, &header.channels))
    throw Error(path + ": cannot read as an image (" + stb_reason() +
                "); expected PNG, JPEG, BMP, TGA, GIF, PSD, HDR, PIC or PNM");
  const std::string too_large = size_error(header);
  if (!too_large.empty()) throw Error(path + ": " + too_large);
  out.file_width = header.width;
  out.file_height = header.height;
  out.file_channels = header.channels;

  out.pixels = Image8::from_shape({size_t(channels), size_t(size), size_t(size)});
  const std::string error = decode_image(path, channels, size, size, out.pixels.data());
  if (!error.empty()) throw Error(path + ": " + error);
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
