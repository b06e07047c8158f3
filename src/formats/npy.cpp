#include "minivit/formats/npy.h"

#include <bit>
#include <cstring>

#include "minivit/core/error.h"
#include "minivit/core/fileio.h"

namespace minivit {

// The values are copied as they lie in memory and declared '<f4'.
static_assert(std::endian::native == std::endian::little, "npy writer assumes a little-endian host");

static const char kMagic[] = "\x93NUMPY";  // 6 bytes
constexpr size_t kMagicLen = 6;

static int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string encode_npy(const float* values, const std::vector<int64_t>& shape) {
  // A 1-tuple needs its trailing comma in Python syntax: (5,) not (5).
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // magic (6) + version (2) + length (2) + header + '\n' is padded to a multiple of 64.
  const size_t prefix = kMagicLen + 2 + 2;
  const size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';
  if (header.size() > 65535) throw Error("npy header too long for format 1.0");

  const int64_t n = element_count(shape);
  std::string out;
  out.reserve(total + size_t(n) * sizeof(float));
  out.append(kMagic, kMagicLen);
  out += char(1), out += char(0);
  out += char(header.size() & 0xFF), out += char(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(values), size_t(n) * sizeof(float));
  return out;
}

void write_npy(const std::string& path, const float* values, const std::vector<int64_t>& shape) {
  write_file_atomic(path, encode_npy(values, shape));
}

// The value text after "'key':" in the header dict, up to the next top-level comma.
static std::string dict_value(const std::string& header, const std::string& key,
                              const std::string& name) {
  const size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) throw Error(name + ": npy header has no '" + key + "'");
  size_t i = header.find(':', k);
  if (i == std::string::npos) throw Error(name + ": malformed npy header");
  ++i;
  while (i < header.size() && header[i] == ' ') ++i;
  size_t j = i;
  int depth = 0;
  for (; j < header.size(); ++j) {
    if (header[j] == '(') ++depth;
    if (header[j] == ')') --depth;
    if ((header[j] == ',' || header[j] == '}') && depth == 0) break;
  }
  return header.substr(i, j - i);
}

NpyArray decode_npy(const std::string& bytes, const std::string& name) {
  if (bytes.size() < 10 || bytes.compare(0, kMagicLen, kMagic, kMagicLen) != 0)
    throw Error(name + ": not a .npy file (no \\x93NUMPY magic)");
  const int major = uint8_t(bytes[6]);
  size_t header_len, start;
  if (major == 1) {
    header_len = uint8_t(bytes[8]) | size_t(uint8_t(bytes[9])) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw Error(name + ": truncated .npy header");
    header_len = 0;
    for (int b = 3; b >= 0; --b) header_len = header_len << 8 | uint8_t(bytes[8 + size_t(b)]);
    start = 12;
  } else {
    throw Error(name + ": .npy format version " + std::to_string(major) + " is not supported");
  }
  if (start + header_len > bytes.size()) throw Error(name + ": truncated .npy header");
  const std::string header = bytes.substr(start, header_len);

  const std::string descr = dict_value(header, "descr", name);
  if (descr != "'<f4'")
    throw Error(name + ": dtype " + descr + ", expected '<f4' (little-endian float32)");
  if (dict_value(header, "fortran_order", name) != "False")
    throw Error(name + ": Fortran-order arrays are not supported (expected C order)");
  std::string dims = dict_value(header, "shape", name);
  if (dims.size() < 2 || dims.front() != '(' || dims.back() != ')')
    throw Error(name + ": malformed shape " + dims);
  NpyArray out;
  for (size_t i = 1; i + 1 < dims.size();) {
    while (i + 1 < dims.size() && (dims[i] == ' ' || dims[i] == ',')) ++i;
    if (i + 1 >= dims.size()) break;
    size_t used = 0;
    try {
      out.shape.push_back(std::stoll(dims.substr(i), &used));
    } catch (const std::exception&) {
      throw Error(name + ": malformed shape " + dims);
    }
    if (out.shape.back() < 0) throw Error(name + ": negative dimension in shape " + dims);
    i += used;
  }
  const size_t n = size_t(element_count(out.shape));
  const size_t data = start + header_len;
  if (bytes.size() - data != n * sizeof(float))
    throw Error(name + ": " + std::to_string(bytes.size() - data) + " data bytes, expected " +
                std::to_string(n * sizeof(float)) + " for shape " + dims);
  out.values.resize(n);
  std::memcpy(out.values.data(), bytes.data() + data, n * sizeof(float));
  return out;
}

NpyArray read_npy(const std::string& path) { return decode_npy(read_file(path), path); }

}  // namespace minivit
