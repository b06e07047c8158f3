#include "minivit/formats/safetensors.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "minivit/core/error.h"
#include "minivit/core/fileio.h"

namespace minivit {

// Tensor bytes are copied straight to and from float arrays; the file format is
// little-endian, so a big-endian port would need byte swaps here.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian machine");
static_assert(sizeof(float) == 4 && std::numeric_limits<float>::is_iec559);

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference reader's limit
constexpr const char* kChecksumKey = "minivit.checksum";

// Names and values in messages come from the file; keep each message one readable line
// however hostile the input is.
std::string printable(const std::string& s, size_t max_len = 200) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max_len; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > max_len) out += "...";
  return out;
}

std::string in_quotes(const std::string& name) { return "'" + printable(name) + "'"; }

// A JSON array from the file for a message: its scalars as written, nested arrays and
// objects as [...] and {...}. Dumping it whole would recurse once per nesting level, and a
// header can nest millions of levels deep within the size limit.
std::string brief_array(const json& array) {
  std::string out = "[";
  for (size_t i = 0; i < array.size() && out.size() <= 200; ++i) {
    const json& v = array[i];
    out += i ? "," : "";
    out += v.is_array() ? "[...]" : v.is_object() ? "{...}" : v.dump();
  }
  return printable(out + "]", 200);
}

std::string crc32_hex(const char* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // crc32() takes a 32-bit length; feed large buffers in pieces.
  const size_t chunk = size_t{1} << 30;
  for (size_t off = 0; off < size; off += chunk) {
    size_t n = std::min(chunk, size - off);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data + off), static_cast<uInt>(n));
  }
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08lx", static_cast<unsigned long>(crc & 0xffffffffUL));
  return buf;
}

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {  // inf / NaN, keeping the payload
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Half subnormals are normal floats: shift the mantissa up until its leading one
    // becomes the implicit bit.
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

struct DtypeInfo {
  const char* name;
  size_t size;
};

const DtypeInfo* find_dtype(const std::string& name) {
  static const DtypeInfo kDtypes[] = {{"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F64", 8}};
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

void convert_to_float(const std::string& dtype, const char* src, size_t count, float* dst) {
  if (count == 0) return;  // dst may be null for an empty vector; memcpy forbids that
  if (dtype == "F32") {
    std::memcpy(dst, src, count * 4);
  } else if (dtype == "F16") {
    for (size_t i = 0; i < count; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      dst[i] = half_to_float(h);
    }
  } else if (dtype == "BF16") {
    for (size_t i = 0; i < count; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      dst[i] = std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
    }
  } else {  // F64
    for (size_t i = 0; i < count; ++i) {
      double d;
      std::memcpy(&d, src + 8 * i, 8);
      dst[i] = static_cast<float>(d);
    }
  }
}

// A JSON number that is a whole, non-negative value fitting in uint64. Floats such as
// 4.0 are refused, as the reference reader does.
bool as_uint64(const json& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

struct Entry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t count;
  uint64_t begin, end;
};

}  // namespace

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string safetensors_bytes(const std::vector<TensorRef>& tensors,
                              std::map<std::string, std::string> metadata) {
  // ordered_json keeps the header in the order the data area has, which is what a human
  // reading it expects; __metadata__ goes first, as the reference writer puts it.
  ordered_json header = ordered_json::object();
  header["__metadata__"] = ordered_json::object();  // filled once the checksum is known
  std::set<std::string> seen;
  std::vector<uint64_t> byte_sizes;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__")
      throw Error("safetensors: '__metadata__' cannot be used as a tensor name");
    if (!seen.insert(t.name).second)
      throw Error("safetensors: duplicate tensor name " + in_quotes(t.name));
    uint64_t count = 1;
    for (int64_t d : t.shape) {
      if (d < 0)
        throw Error("safetensors: tensor " + in_quotes(t.name) + " has a negative dimension " +
                    shape_text(t.shape));
      if (__builtin_mul_overflow(count, static_cast<uint64_t>(d), &count))
        throw Error("safetensors: tensor " + in_quotes(t.name) + " shape " + shape_text(t.shape) +
                    " is too large");
    }
    uint64_t bytes;
    if (__builtin_mul_overflow(count, uint64_t{4}, &bytes))
      throw Error("safetensors: tensor " + in_quotes(t.name) + " is too large");
    if (bytes > 0 && t.data == nullptr)
      throw Error("safetensors: tensor " + in_quotes(t.name) + " has no data");
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    byte_sizes.push_back(bytes);
    offset += bytes;
  }

  std::string data;
  data.reserve(offset);
  for (size_t i = 0; i < tensors.size(); ++i)
    if (byte_sizes[i] > 0)
      data.append(reinterpret_cast<const char*>(tensors[i].data), byte_sizes[i]);

  metadata[kChecksumKey] = crc32_hex(data.data(), data.size());
  for (const auto& [k, v] : metadata) header["__metadata__"][k] = v;

  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception&) {
    // Names and metadata (class names from folder names, say) must be UTF-8 in JSON.
    throw Error(
        "safetensors: cannot write header, a tensor name or metadata string is not "
        "valid UTF-8");
  }
  // Spaces so the data area starts on an 8-byte boundary, as the reference writer does;
  // readers that map the file can then view the floats in place.
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + text.size() + data.size());
  uint64_t n = text.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += text;
  out += data;
  return out;
}

void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::string bytes;
  try {
    bytes = safetensors_bytes(tensors, metadata);
  } catch (const Error& e) {
    std::string msg = e.what();
    const std::string generic = "safetensors: ";
    if (msg.rfind(generic, 0) == 0) msg = msg.substr(generic.size());
    throw Error(path + ": " + msg);
  }
  write_file_atomic(path, bytes);
}

namespace {

// Errors of a file's contents, each naming the file.
struct Failure {
  const std::string& source_name;
  Error operator()(const std::string& what) const { return Error(source_name + ": " + what); }
};

// The header's JSON object, between the 8-byte size and the data.
json parse_header(const char* begin, const char* end, const Failure& fail) {
  // nlohmann keeps the last of duplicate keys silently; a header naming a tensor twice
  // is ambiguous, so spot top-level duplicates while parsing.
  std::set<std::string> top_keys;
  std::string duplicate;
  bool has_duplicate = false;
  auto cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (depth == 1 && ev == json::parse_event_t::key && !has_duplicate) {
      const auto& k = parsed.get_ref<const std::string&>();
      if (!top_keys.insert(k).second) {
        duplicate = k;
        has_duplicate = true;
      }
    }
    return true;
  };
  json header;
  try {
    header = json::parse(begin, end, cb);
  } catch (const json::exception& e) {
    std::string msg = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " tag; keep the position and reason.
    if (auto p = msg.find("] "); p != std::string::npos && msg[0] == '[') msg = msg.substr(p + 2);
    throw fail("header is not valid JSON (" + printable(msg, 300) + ")");
  }
  if (!header.is_object())
    throw fail(std::string("header is JSON ") + header.type_name() + ", expected an object");
  if (has_duplicate) throw fail("header names " + in_quotes(duplicate) + " more than once");
  return header;
}

// One tensor's header entry, checked against its dtype and a data area of data_size bytes.
Entry entry_of(const std::string& name, const json& info, uint64_t data_size,
               const Failure& fail) {
  const std::string what = "tensor " + in_quotes(name);
  if (!info.is_object()) throw fail(what + " entry is not a JSON object");

  auto dt = info.find("dtype");
  if (dt == info.end() || !dt->is_string()) throw fail(what + " has no \"dtype\" string");
  auto sh = info.find("shape");
  if (sh == info.end() || !sh->is_array()) throw fail(what + " has no \"shape\" array");
  auto off = info.find("data_offsets");
  if (off == info.end() || !off->is_array() || off->size() != 2)
    throw fail(what + " has no \"data_offsets\" array of 2 integers");

  Entry e;
  e.name = name;
  e.dtype = dt->get<std::string>();
  uint64_t count = 1;
  bool overflow = false;
  for (const auto& d : *sh) {
    uint64_t v;
    if (!as_uint64(d, v) || v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw fail(what + " shape " + brief_array(*sh) + " must hold non-negative integers");
    e.shape.push_back(static_cast<int64_t>(v));
    overflow = overflow || __builtin_mul_overflow(count, v, &count);
  }
  // A zero dimension makes the tensor empty however large the others are.
  if (std::find(e.shape.begin(), e.shape.end(), 0) != e.shape.end()) {
    count = 0;
    overflow = false;
  }
  if (!as_uint64((*off)[0], e.begin) || !as_uint64((*off)[1], e.end))
    throw fail(what + " data_offsets " + brief_array(*off) + " must be non-negative integers");
  const std::string range = "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
  if (e.begin > e.end) throw fail(what + " data_offsets " + range + " end before they begin");

  const DtypeInfo* dtype = find_dtype(e.dtype);
  if (!dtype)
    throw fail(what + " has dtype " + in_quotes(e.dtype) +
               "; only F32, F16, BF16 and F64 can be read");
  uint64_t nbytes = 0;
  overflow = overflow || __builtin_mul_overflow(count, uint64_t{dtype->size}, &nbytes);
  if (overflow || nbytes != e.end - e.begin)
    throw fail(what + " shape " + shape_text(e.shape) + " of " + e.dtype + " needs " +
               (overflow ? std::string("more bytes than fit in 64") : std::to_string(nbytes)) +
               " bytes but data_offsets " + range + " hold " + std::to_string(e.end - e.begin));
  if (e.end > data_size)
    throw fail(what + " data_offsets " + range + " run past the end of the data area (" +
               std::to_string(data_size) + " bytes)");
  e.count = count;
  return e;
}

// Sorts the entries by their bytes and refuses two that share some: they would alias each
// other's data. Empty tensors own no bytes.
void check_no_overlap(std::vector<Entry>& entries, const Failure& fail) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  const Entry* prev = nullptr;
  for (const auto& e : entries) {
    if (e.begin == e.end) continue;
    if (prev && prev->end > e.begin)
      throw fail("tensors " + in_quotes(prev->name) + " [" + std::to_string(prev->begin) + ", " +
                 std::to_string(prev->end) + "] and " + in_quotes(e.name) + " [" +
                 std::to_string(e.begin) + ", " + std::to_string(e.end) + "] overlap");
    prev = &e;
  }
}

// The header's "__metadata__" strings, none when it has none.
std::map<std::string, std::string> metadata_of(const json& header, const Failure& fail) {
  std::map<std::string, std::string> metadata;
  if (auto m = header.find("__metadata__"); m != header.end()) {
    if (!m->is_object()) throw fail("\"__metadata__\" is not a JSON object");
    for (const auto& [k, v] : m->items()) {
      if (!v.is_string())
        throw fail("metadata " + in_quotes(k) + " is " + v.type_name() + ", expected a string");
      metadata[k] = v.get<std::string>();
    }
  }
  return metadata;
}

// The data area against the checksum the metadata holds, if it holds one.
void check_checksum(const std::map<std::string, std::string>& metadata, const char* data,
                    uint64_t data_size, const Failure& fail) {
  auto c = metadata.find(kChecksumKey);
  if (c == metadata.end()) return;
  std::string said = c->second;
  std::transform(said.begin(), said.end(), said.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  std::string got = crc32_hex(data, data_size);
  if (said != got)
    throw fail("checksum mismatch: file says " + printable(c->second, 40) + ", data gives " +
               got + "; the file is corrupt");
}

}  // namespace

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& source_name) {
  const Failure fail{source_name};
  if (bytes.size() < 8)
    throw fail("file is " + std::to_string(bytes.size()) +
               " bytes, too short for a safetensors header size (8 bytes)");
  uint64_t header_size;
  std::memcpy(&header_size, bytes.data(), 8);
  if (header_size > kMaxHeaderBytes)
    throw fail("header size " + std::to_string(header_size) + " bytes exceeds the " +
               std::to_string(kMaxHeaderBytes) + "-byte limit; not a safetensors file?");
  if (header_size > bytes.size() - 8)
    throw fail("header size " + std::to_string(header_size) + " bytes is larger than the " +
               std::to_string(bytes.size() - 8) + " bytes after the size field; file truncated?");

  const char* header_begin = bytes.data() + 8;
  const char* data = header_begin + header_size;
  const uint64_t data_size = bytes.size() - 8 - header_size;
  const json header = parse_header(header_begin, data, fail);

  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items())
    if (name != "__metadata__") entries.push_back(entry_of(name, info, data_size, fail));
  check_no_overlap(entries, fail);

  SafetensorsFile out;
  out.metadata = metadata_of(header, fail);
  check_checksum(out.metadata, data, data_size, fail);
  for (auto& e : entries) {
    LoadedTensor t;
    t.shape = std::move(e.shape);
    t.data.resize(e.count);
    convert_to_float(e.dtype, data + e.begin, e.count, t.data.data());
    out.order.push_back(e.name);
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

namespace {

// Most tensor bytes read from a stream: far beyond any model this trainer makes, and a
// bound on what an endless stream can make it hold.
constexpr uint64_t kMaxStreamDataBytes = uint64_t(16) << 30;

// The end of the tensor data a header declares: the largest second number of its
// "data_offsets": [begin, end] pairs. Only tells a stream's reader where the file ends;
// parse_safetensors checks the header properly afterwards.
uint64_t declared_data_end(const std::string& header) {
  static const std::string kKey = "\"data_offsets\"";
  uint64_t end = 0;
  for (size_t at = header.find(kKey); at != std::string::npos; at = header.find(kKey, at + 1)) {
    size_t i = at + kKey.size();
    auto skip = [&](char expected) {
      while (i < header.size() && std::isspace(static_cast<unsigned char>(header[i]))) ++i;
      if (i < header.size() && header[i] == expected) return ++i, true;
      return false;
    };
    auto number = [&](uint64_t& value) {
      while (i < header.size() && std::isspace(static_cast<unsigned char>(header[i]))) ++i;
      const char* first = header.data() + i;
      const auto [last, error] = std::from_chars(first, header.data() + header.size(), value);
      i += size_t(last - first);
      return error == std::errc();
    };
    uint64_t begin = 0, finish = 0;
    if (skip(':') && skip('[') && number(begin) && skip(',') && number(finish))
      end = std::max(end, finish);
  }
  return end;
}

// A stream holds one safetensors file: the size field, the header it sizes, the tensor
// bytes the header declares, and nothing after them. Read exactly that, so that an
// endless or oversized stream fails at its first inconsistent field.
std::string read_declared_safetensors(InputFile& in) {
  std::string bytes = in.read_exact(8, "the safetensors header size");
  uint64_t header_size;
  std::memcpy(&header_size, bytes.data(), 8);
  if (header_size > kMaxHeaderBytes) parse_safetensors(bytes, in.name());  // throws its error
  bytes += in.read_exact(header_size, "the safetensors header");
  const uint64_t data_end = declared_data_end(bytes.substr(8));
  if (data_end > kMaxStreamDataBytes)
    throw Error(in.name() + ": the header declares " + std::to_string(data_end) +
                " bytes of tensors, more than the " + std::to_string(kMaxStreamDataBytes) +
                " read from a stream; not a safetensors file?");
  bytes += in.read_exact(data_end, "the tensors the header declares");
  if (!in.at_end())
    throw Error(in.name() + ": more bytes follow the " + std::to_string(bytes.size()) +
                " that the safetensors header declares; not a safetensors file?");
  return bytes;
}

}  // namespace

SafetensorsFile read_safetensors(const std::string& path) {
  InputFile in(path);
  if (in.regular()) return parse_safetensors(in.read_rest(0, "the file is"), in.name());
  return parse_safetensors(read_declared_safetensors(in), in.name());
}

}  // namespace minivit
