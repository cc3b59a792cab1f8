#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/fp16.hpp"
#include "core/inputs/npy.hpp"

using namespace tilemix;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("tilemix-npy-" + std::to_string(::getpid()) + "-" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A .npy file of any version with the given header text (padded to 64 bytes) and data bytes.
std::string npy_bytes(int major, std::string header, const std::string& data) {
  const size_t prefix = major == 1 ? 10 : 12;
  const size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  const uint32_t len = static_cast<uint32_t>(header.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>((len >> 8) & 0xff);
  if (major != 1) {
    out += static_cast<char>((len >> 16) & 0xff);
    out += static_cast<char>(len >> 24);
  }
  return out + header + data;
}

template <class T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <class T>
void round_trip(const TempDir& dir, NpyDtype dtype, const std::vector<T>& values, const std::vector<int64_t>& shape) {
  const std::string path = dir.file(std::string("rt_") + npy_descr(dtype)[1] + npy_descr(dtype)[2] + ".npy");
  write_npy(path, dtype, shape, values.data());
  const std::string raw = read_all(path);
  const size_t data_bytes = values.size() * sizeof(T);
  CHECK((raw.size() - data_bytes) % 64 == 0);  // data starts on a 64-byte boundary
  CHECK(raw.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  CHECK(raw[raw.size() - data_bytes - 1] == '\n');
  const NpyArray arr = read_npy(path);
  CHECK(arr.dtype == dtype);
  CHECK(arr.shape == shape);
  REQUIRE(arr.data.size() == data_bytes);
  // memcmp takes no null pointers, which the data of an empty array may be.
  CHECK((data_bytes == 0 || std::memcmp(arr.data.data(), values.data(), data_bytes) == 0));
}

}  // namespace

TEST_CASE("npy round trip for every dtype", "[npy]") {
  TempDir dir;
  round_trip<uint16_t>(dir, NpyDtype::f16, {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x3555}, {2, 3});
  round_trip<float>(dir, NpyDtype::f32, {1.5f, -2.25f, 1e-30f, 3.0e38f}, {4});
  round_trip<double>(dir, NpyDtype::f64, {1.0 / 3.0, -1e300, 0.0, 5.0, 6.0, 7.0, 8.0, 9.0}, {2, 2, 2});
  round_trip<int8_t>(dir, NpyDtype::i8, {-127, 0, 127, 5, -1}, {5});
  round_trip<uint64_t>(dir, NpyDtype::u64, {0xffffffffffffffffull, 1, 0x8000000000000000ull}, {3, 1});
  round_trip<float>(dir, NpyDtype::f32, {}, {0, 4});
}

TEST_CASE("npy header text matches numpy's layout", "[npy]") {
  TempDir dir;
  const std::vector<float> one{1.0f};
  write_npy(dir.file("a.npy"), NpyDtype::f32, {1}, one.data());
  CHECK_THAT(read_all(dir.file("a.npy")), Contains("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }"));
  write_npy(dir.file("b.npy"), NpyDtype::f32, {1, 1}, one.data());
  CHECK_THAT(read_all(dir.file("b.npy")), Contains("'shape': (1, 1), }"));
  write_npy(dir.file("c.npy"), NpyDtype::f32, {}, one.data());
  CHECK_THAT(read_all(dir.file("c.npy")), Contains("'shape': (), }"));
  CHECK(read_npy(dir.file("c.npy")).shape.empty());
}

TEST_CASE("npy reads format versions 2.0 and 3.0 and numpy's header spellings", "[npy]") {
  TempDir dir;
  const std::vector<float> v{1, 2, 3, 4, 5, 6};
  for (int major : {1, 2, 3}) {
    const std::string path = dir.file("v" + std::to_string(major) + ".npy");
    write_all(path, npy_bytes(major, "{\"descr\": \"<f4\", \"shape\": (2,3), \"fortran_order\": False}", bytes_of(v)));
    const NpyArray arr = read_npy(path);
    CHECK(arr.shape == std::vector<int64_t>{2, 3});
    CHECK(arr.dtype == NpyDtype::f32);
  }
  const std::vector<int8_t> codes{1, -2};
  write_all(dir.file("i1.npy"),
            npy_bytes(1, "{'descr': '<i1', 'fortran_order': False, 'shape': (2,), }", bytes_of(codes)));
  CHECK(read_npy(dir.file("i1.npy")).dtype == NpyDtype::i8);
}

TEST_CASE("bad npy files give errors naming the file", "[npy]") {
  TempDir dir;
  const std::vector<float> v(6, 1.0f);
  const std::string good_header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  SECTION("missing file") {
    CHECK_THROWS_AS(read_npy(dir.file("none.npy")), InputError);
    CHECK_THROWS_WITH(read_npy(dir.file("none.npy")), Contains(dir.file("none.npy") + ": cannot open file"));
  }
  SECTION("bad magic") {
    write_all(dir.file("m.npy"), "PK\x03\x04 this is a zip file");
    CHECK_THROWS_WITH(read_npy(dir.file("m.npy")), Contains(dir.file("m.npy") + ": not a .npy file (bad magic"));
    write_all(dir.file("e.npy"), "");
    CHECK_THROWS_WITH(read_npy(dir.file("e.npy")), Contains("bad magic"));
  }
  SECTION("unsupported version") {
    write_all(dir.file("v9.npy"), npy_bytes(1, good_header, bytes_of(v)).replace(6, 1, "\x09"));
    CHECK_THROWS_WITH(read_npy(dir.file("v9.npy")), Contains("unsupported .npy format version 9.0"));
  }
  SECTION("header parse errors") {
    write_all(dir.file("h1.npy"), npy_bytes(1, "{'descr': '<f4', 'shape': (2, 3), }", bytes_of(v)));
    CHECK_THROWS_WITH(read_npy(dir.file("h1.npy")), Contains(dir.file("h1.npy") + ": bad .npy header (needs the keys"));
    write_all(dir.file("h2.npy"),
              npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", bytes_of(v)));
    CHECK_THROWS_WITH(read_npy(dir.file("h2.npy")), Contains("bad .npy header (expected '('"));
    write_all(dir.file("h3.npy"),
              npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", bytes_of(v)));
    CHECK_THROWS_WITH(read_npy(dir.file("h3.npy")), Contains("expected a non-negative dimension"));
    write_all(dir.file("h4.npy"), std::string("\x93NUMPY\x01\x00\xff\x00{'descr'", 17));
    CHECK_THROWS_WITH(read_npy(dir.file("h4.npy")), Contains("short file: truncated .npy header"));
  }
  SECTION("Fortran order") {
    write_all(dir.file("f.npy"),
              npy_bytes(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", bytes_of(v)));
    CHECK_THROWS_WITH(read_npy(dir.file("f.npy")),
                      Contains(dir.file("f.npy") + ": Fortran-order arrays are not supported"));
  }
  SECTION("unsupported dtype") {
    write_all(dir.file("be.npy"),
              npy_bytes(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", bytes_of(v)));
    CHECK_THROWS_WITH(read_npy(dir.file("be.npy")),
                      dir.file("be.npy") + ": unsupported dtype '>f4' (supported: '<f2', '<f4', '<f8', '|i1', '<u8')");
  }
  SECTION("short and long data") {
    write_all(dir.file("s.npy"), npy_bytes(1, good_header, bytes_of(v).substr(0, 10)));
    CHECK_THROWS_WITH(read_npy(dir.file("s.npy")),
                      Contains(dir.file("s.npy") + ": short file: expected 24 bytes of data, found 10"));
    write_all(dir.file("l.npy"), npy_bytes(1, good_header, bytes_of(v) + "xx"));
    CHECK_THROWS_WITH(read_npy(dir.file("l.npy")), Contains("has 26 bytes of data, but its header says 24"));
  }
}

TEST_CASE("read_npy_as_half converts FP32 and checks shape and dtype", "[npy]") {
  TempDir dir;
  const std::vector<float> f32{1.0f, 1.0f + std::ldexp(1.0f, -11), -65520.0f, 0.1f};
  write_npy(dir.file("f32.npy"), NpyDtype::f32, {2, 2}, f32.data());
  const auto h = read_npy_as_half(dir.file("f32.npy"), {2, 2});
  REQUIRE(h.size() == 4);
  CHECK(h[0] == 0x3c00);
  CHECK(h[1] == 0x3c00);  // ties to even
  CHECK(h[2] == 0xfc00);  // overflows to -inf
  CHECK(h[3] == float_to_half(0.1f));

  const std::vector<uint16_t> f16{0x3c00, 0x4000};
  write_npy(dir.file("f16.npy"), NpyDtype::f16, {2}, f16.data());
  CHECK(read_npy_as_half(dir.file("f16.npy"), {2}) == f16);

  const std::vector<float> q(4 * 8 * 64, 0.5f);
  write_npy(dir.file("q.npy"), NpyDtype::f32, {4, 8, 64}, q.data());
  CHECK_THROWS_WITH(
      read_npy_as_half(dir.file("q.npy"), {4, 8, 128}, "[total_q, hq, d]"),
      dir.file("q.npy") + ": shape [4, 8, 64] does not match the config's [4, 8, 128] ([total_q, hq, d])");

  const std::vector<double> f64{1.0, 2.0};
  write_npy(dir.file("f64.npy"), NpyDtype::f64, {2}, f64.data());
  CHECK_THROWS_WITH(read_npy_as_half(dir.file("f64.npy"), {2}),
                    Contains(dir.file("f64.npy") + ": dtype '<f8' is not supported for attention inputs"));
}

TEST_CASE("npy limits: byte counts past 64 bits, files that are not regular, headers checked before the data",
          "[npy]") {
  TempDir dir;
  SECTION("a shape whose byte count overflows names the shape") {
    write_all(dir.file("o.npy"), npy_bytes(1, "{'descr': '<f2', 'fortran_order': False, 'shape': "
                                              "(4611686018427387904, 4), }", ""));
    CHECK_THROWS_WITH(read_npy(dir.file("o.npy")),
                      dir.file("o.npy") + ": the data of shape [4611686018427387904, 4] and dtype <f2 is "
                                          "4611686018427387904 x 4 x 2 (bytes), more than 9223372036854775807");
    // 2^62 bytes fit 64 bits: that file is short, not too large.
    write_all(dir.file("s.npy"), npy_bytes(1, "{'descr': '|i1', 'fortran_order': False, 'shape': "
                                              "(4611686018427387904, 1), }", ""));
    CHECK_THROWS_WITH(read_npy(dir.file("s.npy")), Contains("short file: expected 4611686018427387904 bytes"));
  }
  SECTION("directories and FIFOs") {
    CHECK_THROWS_WITH(read_npy(dir.path.string()), dir.path.string() + ": is a directory, expected a .npy file");
    const std::string fifo = dir.file("fifo.npy");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_WITH(read_npy(fifo), Contains(fifo + ": is not a regular file"));
    CHECK_THROWS_WITH(read_npy_as_half("/dev/zero", {1}), Contains("/dev/zero: is not a regular file"));
  }
  SECTION("read_npy_as_half refuses a shape or dtype from the header, without reading the data") {
    // The headers promise far more data than the files hold: reading it would be a short-file error.
    write_all(dir.file("big.npy"),
              npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 8), }", ""));
    CHECK_THROWS_WITH(read_npy(dir.file("big.npy")), Contains("short file"));
    CHECK_THROWS_WITH(read_npy_as_half(dir.file("big.npy"), {2, 8}, "[total_q, hq, d]"),
                      dir.file("big.npy") +
                          ": shape [1000000000, 8] does not match the config's [2, 8] ([total_q, hq, d])");
    write_all(dir.file("f8.npy"), npy_bytes(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 8), }", ""));
    CHECK_THROWS_WITH(read_npy_as_half(dir.file("f8.npy"), {2, 8}),
                      Contains("dtype '<f8' is not supported for attention inputs"));
  }
}
