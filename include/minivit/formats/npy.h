#pragma once
// NumPy .npy files (format version 1.0) of float32 arrays in C order: what `attention`
// writes so that `numpy.load` reads the maps with no extra code. The format: the magic
// "\x93NUMPY", version bytes 1 0, a little-endian uint16 header length, then a Python dict
// literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (6, 4, 50, 50), }
// padded with spaces and ended by '\n' so that magic + length + header is a multiple of 64
// bytes (the data area then starts aligned), then the raw values.
#include <cstdint>
#include <string>
#include <vector>

namespace minivit {

// The whole .npy file for `values` (product of `shape` elements, row-major).
std::string encode_npy(const float* values, const std::vector<int64_t>& shape);

// Writes it through write_file_atomic. Throws minivit::Error naming the path on failure.
void write_npy(const std::string& path, const float* values, const std::vector<int64_t>& shape);

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> values;  // row-major
};

// Reads a little-endian float32 C-order .npy (version 1.x or 2.x); anything else
// (another dtype, Fortran order, a truncated file) throws minivit::Error naming the path.
NpyArray read_npy(const std::string& path);

// Same, from the file's bytes (`name` is used in messages).
NpyArray decode_npy(const std::string& bytes, const std::string& name);

}  // namespace minivit
