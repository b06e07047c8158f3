#include "minivit/data/image_io.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <new>

#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/data/data.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image.h>
#include <stb/stb_image_resize.h>
#pragma GCC diagnostic pop

namespace minivit {

namespace {

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

const stbi_uc* as_stb(const std::string& bytes) {
  return reinterpret_cast<const stbi_uc*>(bytes.data());
}

// Reads the header of an image held in memory; "" or why it cannot be used.
std::string memory_header(const std::string& bytes, ImageHeader& header) {
  if (!stbi_info_from_memory(as_stb(bytes), int(bytes.size()), &header.width, &header.height,
                             &header.channels))
    return "not an image stb_image can read: " + stb_reason();
  return size_error(header);
}

// What a stream's first bytes must hold: every format stb_image reads states the image's
// size within them.
constexpr uint64_t kStreamHeaderBytes = uint64_t(1) << 18;

// The bytes of an image input, opened once and read once. A regular file is read whole; a
// stream (pipe, FIFO, standard input) is read as far as the image its first bytes announce
// can take, twice its pixels at 4 bytes each and a megabyte, so an endless or foreign
// stream fails at once. Never throws: "" or why not, without the path.
std::string read_image_bytes(const std::string& path, std::string& bytes) {
  try {
    InputFile in(path);
    if (in.size() > uint64_t(std::numeric_limits<int>::max()))
      return "file is " + std::to_string(in.size()) + " bytes, larger than any image read here";
    if (in.regular()) {
      bytes = in.read_rest(0, "the image is");
      return "";
    }
    bytes = in.read_up_to(kStreamHeaderBytes);
    if (in.at_end()) return "";
    ImageHeader header;
    const std::string error = memory_header(bytes, header);
    if (!error.empty())
      return error + " (from its first " + std::to_string(bytes.size()) + " bytes)";
    const uint64_t bound = 2 * uint64_t(header.width) * uint64_t(header.height) * 4 + (1u << 20);
    bytes += in.read_rest(bound - std::min<uint64_t>(bound, bytes.size()),
                          "an image of " + std::to_string(header.width) + "x" +
                              std::to_string(header.height) + " pixels is");
    return "";
  } catch (const Error& e) {
    const std::string message = e.what();
    const std::string prefix = (is_stdin_path(path) ? "standard input" : path) + ": ";
    return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
  } catch (const std::bad_alloc&) {
    return "out of memory while reading";
  }
}

// Decodes an image held in memory into `out`, planar (channels, height, width).
std::string decode_bytes(const std::string& bytes, int channels, int width, int height,
                         uint8_t* out) {
  ImageHeader header;
  const std::string error = memory_header(bytes, header);
  if (!error.empty()) return error;
  int w = 0, h = 0, stored = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> decoded(
      stbi_load_from_memory(as_stb(bytes), int(bytes.size()), &w, &h, &stored, channels),
      stbi_image_free);
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
}

}  // namespace

std::string read_image_header(const std::string& path, ImageHeader& header) {
  // Only the header: stb reads as little of the file as it needs.
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!file) return std::string("cannot open (") + std::strerror(errno) + ")";
  if (!stbi_info_from_file(file.get(), &header.width, &header.height, &header.channels))
    return "not an image stb_image can read: " + stb_reason();
  return size_error(header);
}

std::string decode_image(const std::string& path, int channels, int width, int height,
                         uint8_t* out) {
  if (channels < 1 || channels > 4)
    return "cannot convert to " + std::to_string(channels) + " channels, expected 1 to 4";
  try {  // an allocation failure must not leave an OpenMP region as an exception
    std::string bytes;
    const std::string error = read_image_bytes(path, bytes);
    if (!error.empty()) return error;
    return decode_bytes(bytes, channels, width, height, out);
  } catch (const std::bad_alloc&) {
    return "out of memory while decoding";
  }
}

LoadedImage load_image_file(const std::string& path, int channels, int size) {
  if (channels < 1 || channels > 4)
    throw Error(path + ": image files can feed models of 1 to 4 channels, but model.channels = " +
                std::to_string(channels));
  const std::string name = is_stdin_path(path) ? "standard input" : path;
  std::error_code ec;
  if (!is_stdin_path(path) && !std::filesystem::exists(path, ec))
    throw Error(path + ": no such image file");
  if (std::filesystem::is_directory(path, ec))
    throw Error(path + ": is a directory, expected an image file (PNG, JPEG, BMP, TGA)");

  std::string bytes;
  std::string error = read_image_bytes(path, bytes);
  if (!error.empty()) throw Error(name + ": " + error);
  LoadedImage out;
  ImageHeader header;
  if (!stbi_info_from_memory(as_stb(bytes), int(bytes.size()), &header.width, &header.height,
                             &header.channels))
    throw Error(name + ": cannot read as an image (" + stb_reason() +
                "); expected PNG, JPEG, BMP, TGA, GIF, PSD, HDR, PIC or PNM");
  const std::string too_large = size_error(header);
  if (!too_large.empty()) throw Error(name + ": " + too_large);
  out.file_width = header.width;
  out.file_height = header.height;
  out.file_channels = header.channels;

  out.pixels = Image8::from_shape({size_t(channels), size_t(size), size_t(size)});
  try {
    error = decode_bytes(bytes, channels, size, size, out.pixels.data());
  } catch (const std::bad_alloc&) {
    error = "out of memory while decoding";
  }
  if (!error.empty()) throw Error(name + ": " + error);
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
