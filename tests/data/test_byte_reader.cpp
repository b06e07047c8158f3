// The reader under the IDX and CIFAR loaders: raw and gzip files read back exactly, and
// every way a file can be broken gives an error that leads with the file's path.
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "minivit/data/byte_reader.h"
#include "test_util.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using minivit::ByteReader;
using minivit_test::read_raw;
using minivit_test::error_of;
using minivit_test::TempDir;
using minivit_test::write_gz;
using minivit_test::write_raw;

namespace {

// Incompressible, so cutting a gzip file of it also cuts the data.
std::string noise_bytes(size_t n) {
  std::string out(n, '\0');
  uint32_t x = 12345;
  for (char& c : out) c = static_cast<char>((x = x * 1103515245 + 12345) >> 24);
  return out;
}

ByteReader open_test_file(const std::string& path) {
  return ByteReader(path, "a test file", "a file of test bytes");
}

std::string read_all(ByteReader& reader, size_t expected) {
  std::vector<uint8_t> buffer(expected + 1);
  size_t got = reader.read_some(buffer.data(), buffer.size());
  return std::string(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(got));
}

}  // namespace

TEST_CASE("byte reader reads a raw file exactly", "[data][byte_reader]") {
  TempDir dir("byte_reader");
  const std::string bytes = noise_bytes(5000);
  write_raw(dir.str("raw"), bytes);
  ByteReader reader = open_test_file(dir.str("raw"));
  CHECK_FALSE(reader.is_gzip());
  CHECK(reader.file_size() == bytes.size());
  CHECK(reader.path() == dir.str("raw"));
  CHECK(read_all(reader, bytes.size()) == bytes);
  CHECK(reader.skip_to_end() == 0);
  CHECK_FALSE(reader.stream_cut_short());
}

TEST_CASE("byte reader reads a gzip file exactly, and again after a rewind",
          "[data][byte_reader]") {
  TempDir dir("byte_reader");
  const std::string bytes = noise_bytes(200000) + std::string(100000, 'a');
  write_gz(dir.str("data.gz"), bytes);
  ByteReader reader = open_test_file(dir.str("data.gz"));
  CHECK(reader.is_gzip());
  CHECK(reader.file_size() == read_raw(dir.str("data.gz")).size());
  CHECK(reader.skip_to_end() == bytes.size());
  CHECK_NOTHROW(reader.check_stream_end());
  reader.rewind();
  CHECK(read_all(reader, bytes.size()) == bytes);
}

TEST_CASE("byte reader reports a truncated file", "[data][byte_reader]") {
  TempDir dir("byte_reader");
  const std::string bytes = noise_bytes(100000);
  SECTION("raw: the data just ends") {
    write_raw(dir.str("short"), bytes.substr(0, 600));
    ByteReader reader = open_test_file(dir.str("short"));
    std::vector<uint8_t> buffer(1000);
    CHECK(reader.read_some(buffer.data(), buffer.size()) == 600);
    CHECK_FALSE(reader.stream_cut_short());
  }
  SECTION("gzip: the stream stops short of its end marker") {
    write_gz(dir.str("whole.gz"), bytes);
    const std::string gz = read_raw(dir.str("whole.gz"));
    write_raw(dir.str("cut.gz"), gz.substr(0, gz.size() / 2));
    ByteReader reader = open_test_file(dir.str("cut.gz"));
    CHECK(reader.skip_to_end() < bytes.size());
    CHECK(reader.stream_cut_short());
    CHECK_THAT(error_of([&] { reader.check_stream_end(); }),
               StartsWith(dir.str("cut.gz") + ": truncated gzip data (zlib: "));
  }
}

TEST_CASE("byte reader reports corrupt gzip data through zlib's message",
          "[data][byte_reader]") {
  TempDir dir("byte_reader");
  write_gz(dir.str("whole.gz"), noise_bytes(20000));
  std::string gz = read_raw(dir.str("whole.gz"));
  // Flip bits in the deflate data, past the 10-byte gzip header.
  for (size_t i = 20; i < gz.size() - 8; i += 7) gz[i] = static_cast<char>(gz[i] ^ 0x5a);
  write_raw(dir.str("bad.gz"), gz);
  ByteReader reader = open_test_file(dir.str("bad.gz"));
  const std::string message = error_of([&] { reader.skip_to_end(); });
  CHECK_THAT(message, StartsWith(dir.str("bad.gz") + ": corrupt gzip data (zlib: "));
  // zlib puts the path in front of its own message; it is said once, not twice.
  CHECK(message.find(dir.str("bad.gz"), 1) == std::string::npos);
}

TEST_CASE("byte reader names a missing file or a directory and what was expected",
          "[data][byte_reader]") {
  TempDir dir("byte_reader");
  CHECK(error_of([&] { open_test_file(dir.str("nope")); }) ==
        dir.str("nope") + ": no such file (expected a test file)");
  std::filesystem::create_directory(dir.path / "folder");
  CHECK(error_of([&] { open_test_file(dir.str("folder")); }) ==
        dir.str("folder") + ": is a directory, expected a file of test bytes");
  std::filesystem::create_symlink("loop", dir.path / "loop");
  CHECK_THAT(error_of([&] { open_test_file(dir.str("loop")); }),
             StartsWith(dir.str("loop") + ": cannot read ("));
}

TEST_CASE("find_raw_or_gzip prefers the raw file, then the .gz, then nothing",
          "[data][byte_reader]") {
  TempDir dir("byte_reader");
  using minivit::find_raw_or_gzip;
  CHECK(find_raw_or_gzip(dir.path, "x").empty());
  write_gz(dir.str("x.gz"), "a");
  CHECK(find_raw_or_gzip(dir.path, "x") == dir.str("x.gz"));
  write_raw(dir.str("x"), "a");
  CHECK(find_raw_or_gzip(dir.path, "x") == dir.str("x"));
  // Whatever is at the name is found, so that opening it can say what is wrong with it.
  std::filesystem::create_directory(dir.path / "y");
  write_gz(dir.str("y.gz"), "a");
  CHECK(find_raw_or_gzip(dir.path, "y") == dir.str("y"));
}

TEST_CASE("a device or a FIFO in place of a dataset file is refused at once", "[data][streams]") {
  TempDir tmp("byte_reader_device");
  const std::string device = tmp.str("train-images-idx3-ubyte");
  std::filesystem::create_symlink("/dev/zero", device);
  const std::string message = error_of([&] { open_test_file(device); });
  CHECK_THAT(message, StartsWith(device + ": "));
  CHECK_THAT(message, Contains("not a regular file"));
}
