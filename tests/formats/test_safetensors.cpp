#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "minivit/core/error.h"
#include "minivit/core/fileio.h"
#include "minivit/formats/safetensors.h"
#include "test_util.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using minivit::parse_safetensors;

namespace {

const std::string kSrc = "runs/x/last.safetensors";

std::string u64_le(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A file in the exact layout the reference (Rust) writer produces: size, JSON padded with
// spaces to a multiple of 8, then the data.
std::string st_file(const std::string& header, const std::string& data, bool pad = true) {
  std::string h = header;
  if (pad) h.append((8 - h.size() % 8) % 8, ' ');
  return u64_le(h.size()) + h + data;
}

std::string float_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

template <typename T>
std::string raw_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> b;
  for (float f : v) b.push_back(std::bit_cast<uint32_t>(f));
  return b;
}

// A valid minivit-written file with a few tensors and metadata.
std::string sample_file() {
  static std::vector<float> a = {1, 2, 3, 4, 5, 6};
  static std::vector<float> b = {-1.5f, 0.25f, 1e-3f};
  static std::vector<float> c = {7};
  return minivit::safetensors_bytes(
      {{"w.a", {2, 3}, a.data()}, {"w.b", {3}, b.data()}, {"w.c", {}, c.data()}},
      {{"minivit.step", "12"}});
}

std::string checksum_of(const std::string& file) {
  return parse_safetensors(file, kSrc).metadata.at("minivit.checksum");
}

}  // namespace

// Checks the error is a minivit::Error, one line, starting with the source name and
// naming the problem.
#define REQUIRE_REJECTED(bytes, fragment)                                                  \
  do {                                                                                     \
    const std::string bytes_ = (bytes);                                                    \
    REQUIRE_THROWS_AS(parse_safetensors(bytes_, kSrc), minivit::Error);                    \
    REQUIRE_THROWS_WITH(parse_safetensors(bytes_, kSrc),                                   \
                        StartsWith(kSrc + ": ") && Contains(fragment) && !Contains("\n")); \
  } while (0)

TEST_CASE("safetensors round trip is bit-exact, keeps order, metadata and shapes",
          "[safetensors]") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> odd = {
      -0.0f,
      0.0f,
      std::bit_cast<float>(0x7fc12345u),  // quiet NaN with a payload
      std::bit_cast<float>(0xff812345u),  // negative signalling-pattern NaN with a payload
      std::numeric_limits<float>::denorm_min(),
      -std::numeric_limits<float>::denorm_min() * 3,
      std::bit_cast<float>(0x007fffffu),  // largest denormal
      inf,
      -inf,
      std::numeric_limits<float>::max(),
      std::numeric_limits<float>::lowest(),
      1.0f / 3.0f};
  std::vector<float> w(2 * 3 * 4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i)) * 100;
  std::vector<float> s = {42};

  // Not in name order, to check the writer keeps the order given.
  std::vector<minivit::TensorRef> in = {{"zeta.odd", {3, 4}, odd.data()},
                                        {"alpha.w", {2, 3, 4}, w.data()},
                                        {"empty", {0, 5}, nullptr},
                                        {"scalar", {}, s.data()}};
  std::map<std::string, std::string> meta = {{"minivit.model.dim", "64"},
                                             {"minivit.classes", "cat,dog,\"bird\"\nfish"},
                                             {"unicode", "\xc3\xa9t\xc3\xa9"}};
  std::string bytes = minivit::safetensors_bytes(in, meta);
  auto f = parse_safetensors(bytes, kSrc);

  REQUIRE(f.order == std::vector<std::string>{"zeta.odd", "alpha.w", "empty", "scalar"});
  REQUIRE(f.tensors.size() == 4);
  CHECK(f.tensors.at("zeta.odd").shape == std::vector<int64_t>{3, 4});
  CHECK(bits_of(f.tensors.at("zeta.odd").data) == bits_of(odd));
  CHECK(f.tensors.at("alpha.w").shape == std::vector<int64_t>{2, 3, 4});
  CHECK(bits_of(f.tensors.at("alpha.w").data) == bits_of(w));
  CHECK(f.tensors.at("empty").shape == std::vector<int64_t>{0, 5});
  CHECK(f.tensors.at("empty").data.empty());
  CHECK(f.tensors.at("scalar").shape.empty());
  CHECK(f.tensors.at("scalar").data == std::vector<float>{42});

  for (const auto& [k, v] : meta) CHECK(f.metadata.at(k) == v);
  REQUIRE(f.metadata.count("minivit.checksum") == 1);
  const std::string& sum = f.metadata.at("minivit.checksum");
  CHECK(sum.size() == 8);
  CHECK(sum.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(f.metadata.size() == meta.size() + 1);
}

TEST_CASE("safetensors writer lays tensors out contiguously in the order given", "[safetensors]") {
  std::vector<float> a = {1, 2, 3}, b = {4, 5};
  std::string bytes = minivit::safetensors_bytes({{"b", {3}, a.data()}, {"a", {2}, b.data()}}, {});
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(bytes.substr(8 + n) == float_bytes({1, 2, 3, 4, 5}));
  std::string header = bytes.substr(8, n);
  CHECK(header.find(R"("b":{"dtype":"F32","shape":[3],"data_offsets":[0,12]})") !=
        std::string::npos);
  CHECK(header.find(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[12,20]})") !=
        std::string::npos);
}

TEST_CASE("shape_text writes a shape as a bracketed list", "[safetensors]") {
  CHECK(minivit::shape_text({2, 3, 4}) == "[2, 3, 4]");
  CHECK(minivit::shape_text({7}) == "[7]");
  CHECK(minivit::shape_text({}) == "[]");
}

TEST_CASE("safetensors header is padded with spaces so the data starts at a multiple of 8",
          "[safetensors]") {
  std::vector<float> a = {1, 2, 3};
  // Metadata of every length mod 8 moves the JSON length through every remainder.
  for (int extra = 0; extra < 16; ++extra) {
    std::string bytes =
        minivit::safetensors_bytes({{"a", {3}, a.data()}}, {{"k", std::string(extra, 'x')}});
    uint64_t n;
    std::memcpy(&n, bytes.data(), 8);
    INFO("extra = " << extra << ", header size = " << n);
    CHECK(n % 8 == 0);
    CHECK((8 + n) % 8 == 0);
    REQUIRE(n <= bytes.size() - 8);
    CHECK(bytes.size() - 8 - n == 12);
    std::string header = bytes.substr(8, n);
    size_t close = header.find_last_of('}');
    CHECK(n - (close + 1) < 8);  // at most 7 bytes of padding
    CHECK(header.find_first_not_of(' ', close + 1) == std::string::npos);
    CHECK(parse_safetensors(bytes, kSrc).metadata.at("k") == std::string(extra, 'x'));
  }
}

TEST_CASE("safetensors reads a file in the reference layout without a checksum", "[safetensors]") {
  // What safetensors.torch.save_file({"weight": ..., "bias": ...}, metadata={"format": "pt"})
  // writes: __metadata__ first, tensors sorted by name, no minivit checksum.
  std::string header = R"({"__metadata__":{"format":"pt"},)"
                       R"("bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("weight":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]}})";
  std::string file = st_file(header, float_bytes({0.5f, -0.5f, 1, 2, 3, 4}));
  REQUIRE((file.size() - 24) % 8 == 0);
  auto f = parse_safetensors(file, kSrc);
  CHECK(f.metadata == std::map<std::string, std::string>{{"format", "pt"}});
  CHECK(f.order == std::vector<std::string>{"bias", "weight"});
  CHECK(f.tensors.at("bias").data == std::vector<float>{0.5f, -0.5f});
  CHECK(f.tensors.at("weight").shape == std::vector<int64_t>{2, 2});
  CHECK(f.tensors.at("weight").data == std::vector<float>{1, 2, 3, 4});

  SECTION("no metadata at all, unpadded header, and order follows offsets not names") {
    std::string h2 = R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                     R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
    auto g = parse_safetensors(st_file(h2, float_bytes({1, 2}), false), kSrc);
    CHECK(g.metadata.empty());
    CHECK(g.order == std::vector<std::string>{"b", "a"});
    CHECK(g.tensors.at("a").data == std::vector<float>{2});
  }
}

TEST_CASE("safetensors converts F16, BF16 and F64 to float", "[safetensors]") {
  // F16: 1, -2, 65504 (max), 2^-24 (smallest subnormal), 2^-14 (smallest normal),
  // 768 * 2^-24 (a subnormal with several mantissa bits), -0, +inf, NaN
  std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x0400,
                               0x0300, 0x8000, 0x7c00, 0x7e00};
  std::vector<uint16_t> bf16 = {0x3f80, 0xc040, 0x0000, 0xff80};
  std::vector<double> f64 = {0.1, -1e300, 3.0};
  std::string data = raw_bytes(f16) + raw_bytes(bf16) + raw_bytes(f64);
  std::string header = R"({"h":{"dtype":"F16","shape":[9],"data_offsets":[0,18]},)"
                       R"("b":{"dtype":"BF16","shape":[2,2],"data_offsets":[18,26]},)"
                       R"("d":{"dtype":"F64","shape":[3],"data_offsets":[26,50]}})";
  auto f = parse_safetensors(st_file(header, data), kSrc);
  const auto& h = f.tensors.at("h").data;
  REQUIRE(h.size() == 9);
  CHECK(h[0] == 1.0f);
  CHECK(h[1] == -2.0f);
  CHECK(h[2] == 65504.0f);
  CHECK(h[3] == std::ldexp(1.0f, -24));
  CHECK(h[4] == std::ldexp(1.0f, -14));
  CHECK(h[5] == 768 * std::ldexp(1.0f, -24));
  CHECK(std::bit_cast<uint32_t>(h[6]) == 0x80000000u);
  CHECK(h[7] == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(h[8]));
  CHECK(f.tensors.at("b").data ==
        std::vector<float>{1.0f, -3.0f, 0.0f, -std::numeric_limits<float>::infinity()});
  CHECK(f.tensors.at("b").shape == std::vector<int64_t>{2, 2});
  const auto& d = f.tensors.at("d").data;
  CHECK(d[0] == 0.1f);
  CHECK(d[1] == -std::numeric_limits<float>::infinity());
  CHECK(d[2] == 3.0f);
  CHECK(f.order == std::vector<std::string>{"h", "b", "d"});
}

TEST_CASE("safetensors rejects corrupt files with a message naming the problem", "[safetensors]") {
  const std::string good = sample_file();
  const std::string one = float_bytes({1, 2});  // 8 bytes of data
  auto tensor = [](const std::string& body) { return "{\"t\":" + body + "}"; };

  SECTION("flipped data byte") {
    std::string bad = good;
    bad[bad.size() - 5] ^= 0x10;
    REQUIRE_REJECTED(bad, "checksum mismatch: file says " + checksum_of(good) + ", data gives ");
    REQUIRE_REJECTED(bad, "the file is corrupt");
  }
  SECTION("truncated file") {
    REQUIRE_REJECTED(good.substr(0, good.size() - 4), "run past the end of the data area");
    REQUIRE_REJECTED(good.substr(0, 20), "is larger than the 12 bytes after the size field");
    REQUIRE_REJECTED(good.substr(0, 5), "file is 5 bytes, too short");
    REQUIRE_REJECTED("", "file is 0 bytes");
  }
  SECTION("header size larger than the file") {
    REQUIRE_REJECTED(u64_le(100) + "{}", "header size 100 bytes is larger than the 2 bytes");
  }
  SECTION("header size huge") {
    REQUIRE_REJECTED(u64_le(~uint64_t{0}) + "{}", "exceeds the 100000000-byte limit");
    REQUIRE_REJECTED(u64_le(100'000'001) + "{}", "header size 100000001 bytes exceeds");
  }
  SECTION("invalid JSON") {
    REQUIRE_REJECTED(st_file("{\"t\": {\"dtype\": ", ""), "header is not valid JSON");
    REQUIRE_REJECTED(st_file("\x01\x02garbage", ""), "header is not valid JSON");
    REQUIRE_REJECTED(st_file("{\"a\xff\": 1}", ""), "header is not valid JSON");
    REQUIRE_REJECTED(st_file("[1, 2]", ""), "header is JSON array, expected an object");
  }
  SECTION("deeply nested JSON neither crashes nor recurses away the stack") {
    std::string deep(1'000'000, '[');
    REQUIRE_REJECTED(st_file(deep, ""), "header is not valid JSON");
    REQUIRE_REJECTED(st_file(deep + std::string(1'000'000, ']'), ""), "expected an object");
  }
  SECTION("offsets past the end of the data area") {
    REQUIRE_REJECTED(st_file(tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[4,12]})"), one),
                     "tensor 't' data_offsets [4, 12] run past the end of the data area (8 bytes)");
  }
  SECTION("overlapping offsets") {
    std::string h = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
    REQUIRE_REJECTED(st_file(h, one + one), "tensors 'a' [0, 8] and 'b' [4, 12] overlap");
    std::string same = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    REQUIRE_REJECTED(st_file(same, one), "overlap");
  }
  SECTION("shape does not match the byte range") {
    REQUIRE_REJECTED(st_file(tensor(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), one),
                     "tensor 't' shape [3] of F32 needs 12 bytes but data_offsets [0, 8] hold 8");
    REQUIRE_REJECTED(
        st_file(tensor(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})"),
                one),
        "more bytes than fit in 64");
    REQUIRE_REJECTED(
        st_file(tensor(R"({"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]})"),
                one),
        "more bytes than fit in 64");
  }
  SECTION("unknown dtype") {
    REQUIRE_REJECTED(st_file(tensor(R"({"dtype":"I64","shape":[1],"data_offsets":[0,8]})"), one),
                     "tensor 't' has dtype 'I64'; only F32, F16, BF16 and F64 can be read");
  }
  SECTION("metadata that is not a string") {
    std::string h = R"({"__metadata__":{"epoch":3},)"
                    R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    REQUIRE_REJECTED(st_file(h, one), "metadata 'epoch' is number, expected a string");
    REQUIRE_REJECTED(st_file(R"({"__metadata__":["x"]})", ""),
                     "\"__metadata__\" is not a JSON object");
  }
  SECTION("malformed entries") {
    auto bad = [&](const std::string& body, const std::string& fragment) {
      INFO(body);
      REQUIRE_REJECTED(st_file(tensor(body), one), fragment);
    };
    bad("3", "tensor 't' entry is not a JSON object");
    bad(R"({"shape":[2],"data_offsets":[0,8]})", "has no \"dtype\" string");
    bad(R"({"dtype":7,"shape":[2],"data_offsets":[0,8]})", "has no \"dtype\" string");
    bad(R"({"dtype":"F32","data_offsets":[0,8]})", "has no \"shape\" array");
    bad(R"({"dtype":"F32","shape":[2]})", "has no \"data_offsets\" array of 2 integers");
    bad(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8,9]})", "array of 2 integers");
    bad(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})", "must hold non-negative integers");
    bad(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})", "must hold non-negative integers");
    bad(R"({"dtype":"F32","shape":["2"],"data_offsets":[0,8]})", "must hold non-negative integers");
    bad(R"({"dtype":"F32","shape":[99999999999999999999999],"data_offsets":[0,8]})",
        "must hold non-negative integers");
    bad(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})", "must be non-negative integers");
    bad(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})", "[8, 0] end before they begin");
  }
  SECTION("a tensor named twice") {
    std::string h = R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
    REQUIRE_REJECTED(st_file(h, one), "header names 't' more than once");
  }
  SECTION("control characters in names stay on one line") {
    REQUIRE_REJECTED(st_file(R"({"a\nb":{"dtype":"Q\n","shape":[1],"data_offsets":[0,4]}})", one),
                     "tensor 'a\\x0ab' has dtype 'Q\\x0a'");
  }
}

TEST_CASE("safetensors ignores gaps and accepts empty tensors anywhere", "[safetensors]") {
  // Gaps between tensors are not something minivit writes, but they are harmless.
  std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                  R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                  R"("z":{"dtype":"F32","shape":[2,0,3],"data_offsets":[8,8]}})";
  auto f = parse_safetensors(st_file(h, float_bytes({9, 1})), kSrc);
  CHECK(f.tensors.at("a").data == std::vector<float>{1});
  CHECK(f.order == std::vector<std::string>{"e", "a", "z"});
}

TEST_CASE("safetensors writer refuses bad input", "[safetensors]") {
  std::vector<float> a = {1, 2};
  REQUIRE_THROWS_AS(minivit::safetensors_bytes({{"x", {2}, a.data()}, {"x", {2}, a.data()}}, {}),
                    minivit::Error);
  REQUIRE_THROWS_WITH(minivit::safetensors_bytes({{"x", {2}, a.data()}, {"x", {2}, a.data()}}, {}),
                      Contains("duplicate tensor name 'x'"));
  REQUIRE_THROWS_AS(minivit::safetensors_bytes({{"__metadata__", {2}, a.data()}}, {}),
                    minivit::Error);
  REQUIRE_THROWS_AS(minivit::safetensors_bytes({{"x", {-1}, a.data()}}, {}), minivit::Error);
  REQUIRE_THROWS_AS(minivit::safetensors_bytes({{"x", {2}, nullptr}}, {}), minivit::Error);
  REQUIRE_THROWS_WITH(minivit::safetensors_bytes({{"x", {2}, a.data()}}, {{"k", "\xff"}}),
                      Contains("not valid UTF-8"));
  // A stale checksum passed in by the caller is replaced, not trusted.
  auto f = parse_safetensors(
      minivit::safetensors_bytes({{"x", {2}, a.data()}}, {{"minivit.checksum", "00000000"}}), kSrc);
  CHECK(f.metadata.at("minivit.checksum") != "00000000");
}

TEST_CASE("write_safetensors replaces the file atomically and leaves no temp file",
          "[safetensors]") {
  minivit_test::TempDir dir("safetensors");
  const std::string path = dir.str("last.safetensors");
  std::vector<float> v1 = {1, 2, 3}, v2 = {4, 5, 6, 7};

  minivit::write_safetensors(path, {{"w", {3}, v1.data()}}, {{"minivit.step", "1"}});
  auto f1 = minivit::read_safetensors(path);
  CHECK(f1.tensors.at("w").data == v1);
  CHECK(f1.metadata.at("minivit.step") == "1");

  // A hard link keeps the old inode reachable: writing in place would change what it sees,
  // a rename leaves it holding the old checkpoint whole.
  const std::string old_link = dir.str("old.link");
  REQUIRE(::link(path.c_str(), old_link.c_str()) == 0);
  minivit::write_safetensors(path, {{"w", {2, 2}, v2.data()}}, {{"minivit.step", "2"}});
  auto f2 = minivit::read_safetensors(path);
  CHECK(f2.tensors.at("w").data == v2);
  CHECK(f2.tensors.at("w").shape == std::vector<int64_t>{2, 2});
  CHECK(f2.metadata.at("minivit.step") == "2");
  auto old = minivit::read_safetensors(old_link);
  CHECK(old.tensors.at("w").data == v1);
  std::filesystem::remove(old_link);

  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path))
    names.push_back(e.path().filename().string());
  CHECK(names == std::vector<std::string>{"last.safetensors"});

  // A failed write names the path and leaves the previous file alone.
  std::vector<float> bad = {0};
  REQUIRE_THROWS_WITH(
      minivit::write_safetensors(path, {{"d", {1}, bad.data()}, {"d", {1}, bad.data()}}, {}),
      StartsWith(path + ": ") && Contains("duplicate"));
  CHECK(minivit::read_safetensors(path).tensors.at("w").data == v2);

  REQUIRE_THROWS_WITH(minivit::read_safetensors(dir.str("missing.safetensors")),
                      Contains("missing.safetensors"));
}

TEST_CASE("safetensors parser survives random corruption", "[safetensors]") {
  // Two starting points: a checksummed minivit file (most data flips end in a checksum
  // error) and a reference-style file without one (data flips parse, header flips probe
  // the header checks), mixing dtypes so every converter sees garbage.
  std::vector<uint16_t> f16 = {0x3c00, 0x7c01, 0x0001, 0xfbff};
  std::string header = R"({"__metadata__":{"format":"pt"},)"
                       R"("h":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},)"
                       R"("d":{"dtype":"F64","shape":[1],"data_offsets":[8,16]},)"
                       R"("f":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})";
  const std::vector<std::string> seeds = {
      sample_file(),
      st_file(header, raw_bytes(f16) + raw_bytes(std::vector<double>{2.5}) + float_bytes({1, 2}))};
  for (const auto& s : seeds) REQUIRE_NOTHROW(parse_safetensors(s, kSrc));

  std::mt19937 rng(1234);
  int parsed = 0, rejected = 0;
  for (int it = 0; it < 2000; ++it) {
    std::string bytes = seeds[it % 2];
    int mode = static_cast<int>(rng() % 4);
    if (mode != 1) {  // flip 1..4 bytes, mostly in the size field and header
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) {
        size_t limit = (rng() % 4 == 0) ? bytes.size() : std::min<size_t>(bytes.size(), 200);
        size_t pos = rng() % limit;
        bytes[pos] = static_cast<char>(bytes[pos] ^ (1u << (rng() % 8)));
      }
    }
    if (mode >= 1 && mode <= 2) bytes.resize(rng() % (bytes.size() + 1));
    if (mode == 3) {  // a random byte value, not just a bit flip
      size_t pos = rng() % std::min<size_t>(bytes.size(), 120);
      bytes[pos] = static_cast<char>(rng() & 0xff);
    }
    try {
      parse_safetensors(bytes, kSrc);
      ++parsed;
    } catch (const minivit::Error& e) {
      ++rejected;
      std::string msg = e.what();
      if (msg.rfind(kSrc + ": ", 0) != 0 || msg.find('\n') != std::string::npos)
        FAIL("iteration " << it << ": badly formed message: " << msg);
    } catch (const std::exception& e) {
      FAIL("iteration " << it << ": non-minivit exception: " << e.what());
    } catch (...) {
      FAIL("iteration " << it << ": unknown exception");
    }
  }
  CHECK(parsed + rejected == 2000);
  CHECK(rejected > 0);
  CHECK(parsed > 0);
}
