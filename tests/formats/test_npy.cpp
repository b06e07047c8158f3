// The .npy writer and reader: NumPy's header, shape and dtype, and clear refusals of files
// that are short, of another dtype or not .npy at all.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "minivit/formats/npy.h"

using namespace minivit;
using Catch::Matchers::Contains;

TEST_CASE(".npy files have NumPy's header, shape and dtype and read back", "[npy]") {
  std::vector<float> v(2 * 3 * 4 * 5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.5f - 3.f;
  const std::string bytes = encode_npy(v.data(), {2, 3, 4, 5});
  REQUIRE(bytes.size() > 10);
  CHECK(bytes.substr(0, 6) == "\x93NUMPY");
  CHECK(bytes[6] == 1);
  CHECK(bytes[7] == 0);
  const size_t header_len = uint8_t(bytes[8]) | size_t(uint8_t(bytes[9])) << 8;
  CHECK((10 + header_len) % 64 == 0);
  const std::string header = bytes.substr(10, header_len);
  CHECK(header.back() == '\n');
  CHECK_THAT(header, Contains("'descr': '<f4'") && Contains("'fortran_order': False") &&
                         Contains("'shape': (2, 3, 4, 5)"));
  CHECK(bytes.size() == 10 + header_len + v.size() * 4);
  const NpyArray back = decode_npy(bytes, "x.npy");
  CHECK(back.shape == std::vector<int64_t>{2, 3, 4, 5});
  CHECK(back.values == v);

  const std::string one = encode_npy(v.data(), {7});
  CHECK_THAT(one, Contains("'shape': (7,)"));
  CHECK(decode_npy(one, "one.npy").shape == std::vector<int64_t>{7});

  CHECK_THROWS_WITH(decode_npy(bytes.substr(0, bytes.size() - 4), "short.npy"),
                    Contains("short.npy") && Contains("data bytes"));
  std::string f8 = bytes;
  f8.replace(f8.find("<f4"), 3, "<f8");
  CHECK_THROWS_WITH(decode_npy(f8, "f8.npy"), Contains("f8.npy") && Contains("float32"));
  CHECK_THROWS_WITH(decode_npy("hello", "text.npy"), Contains("text.npy"));
}
