#pragma once
// The safetensors file format: 8-byte little-endian header length, a JSON header
// {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {"key": "string value", ...}}, then the raw tensor bytes.
// minivit writes only F32 and adds "minivit.checksum" (CRC-32 of all tensor bytes, as
// 8 lowercase hex digits) to the metadata; a reader verifies it when present.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace minivit {

struct TensorRef {  // a tensor to be written, borrowed from the caller
  std::string name;
  std::vector<int64_t> shape;
  const float* data;
};

struct LoadedTensor {  // a tensor read back, owning its data
  std::vector<int64_t> shape;
  std::vector<float> data;
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::map<std::string, LoadedTensor> tensors;
  std::vector<std::string> order;  // tensor names in file (data offset) order
};

// Serialises to bytes (tensors laid out in the order given). Adds the checksum key.
std::string safetensors_bytes(const std::vector<TensorRef>& tensors,
                              std::map<std::string, std::string> metadata);

// Writes atomically (temporary name, fsync, rename).
void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata);

// Reads and checks: header length within the file and at most 100 MB, valid JSON, every
// tensor F32 (F16/BF16/F64 are converted to float), shape product matching its byte range,
// ranges inside the data area and not overlapping, checksum matching when present.
// Throws minivit::Error: "PATH: <what is wrong>".
SafetensorsFile read_safetensors(const std::string& path);
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& source_name);

// A tensor shape as messages and `minivit info` print it: "[2, 3, 4]".
std::string shape_text(const std::vector<int64_t>& shape);

}  // namespace minivit
