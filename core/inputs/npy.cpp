#include "core/inputs/npy.hpp"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include "core/error.hpp"
#include "core/fp16.hpp"
#include "core/input_file.hpp"
#include "core/sizes.hpp"

namespace tilemix {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// "'<f2', '<f4', ...": the dtypes read, for errors.
std::string supported_descrs() {
  std::string text;
  for (NpyDtype dtype : enum_values(kNpyDescrs)) {
    text += std::string(text.empty() ? "'" : ", '") + npy_descr(dtype) + "'";
  }
  return text;
}

// The header is a Python dict literal: {'descr': '<f2', 'fortran_order': False, 'shape': (4, 8), }
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& file) : s_(text), file_(file) {}

  NpyArray parse() {
    NpyArray arr;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = quoted();
      expect(':');
      skip_space();
      if (key == "descr") {
        const std::string descr = quoted();
        const std::optional<NpyDtype> dtype = parse_enum(kNpyDescrs, descr);
        if (!dtype) {
          throw InputError(file_, "unsupported dtype '" + descr + "' (supported: " + supported_descrs() + ")");
        }
        arr.dtype = *dtype;
        have_descr = true;
      } else if (key == "fortran_order") {
        const std::string word = identifier();
        if (word == "True") throw InputError(file_, "Fortran-order arrays are not supported; save in C order");
        if (word != "False") fail("fortran_order must be True or False, got '" + word + "'");
        have_order = true;
      } else if (key == "shape") {
        arr.shape = tuple();
        have_shape = true;
      } else {
        fail("unexpected key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      skip_space();
      if (peek() != '}') fail("expected ',' or '}'");
    }
    if (!have_descr || !have_order || !have_shape) fail("needs the keys 'descr', 'fortran_order' and 'shape'");
    return arr;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(file_, "bad .npy header (" + what + " at character " + std::to_string(i_) + "): " + s_);
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string quoted() {
    skip_space();
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    const size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return out;
  }
  std::string identifier() {
    const size_t begin = i_;
    while (i_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i_]))) ++i_;
    return s_.substr(begin, i_ - begin);
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    expect('(');
    for (;;) {
      skip_space();
      if (peek() == ')') break;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("expected a non-negative dimension");
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        const int digit = peek() - '0';
        if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) fail("dimension too large");
        v = v * 10 + digit;
        ++i_;
      }
      // numpy writes Python ints; older writers may append 'L'
      if (peek() == 'L') ++i_;
      dims.push_back(v);
      skip_space();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      skip_space();
      if (peek() != ')') fail("expected ',' or ')' in shape");
    }
    ++i_;
    return dims;
  }

  const std::string& s_;
  const std::string& file_;
  size_t i_ = 0;
};

uint64_t read_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

size_t npy_item_size(NpyDtype dtype) {
  switch (dtype) {
    case NpyDtype::f16: return 2;
    case NpyDtype::f32: return 4;
    case NpyDtype::f64: return 8;
    case NpyDtype::i8: return 1;
    case NpyDtype::u64: return 8;
  }
  return 0;
}

NpyArray read_npy(const std::string& path, const std::function<void(const NpyArray&)>& check_header) {
  const int64_t size = regular_file_size(path, "a .npy file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, std::string("cannot open file: ") + std::strerror(errno));
  unsigned char lead[12] = {};
  in.read(reinterpret_cast<char*>(lead), 10);
  if (in.gcount() < 10 || std::memcmp(lead, kMagic, kMagicLen) != 0) {
    throw InputError(path, "not a .npy file (bad magic; expected \\x93NUMPY)");
  }
  const int major = lead[6], minor = lead[7];
  uint64_t header_len = 0;
  size_t prefix = 10;
  if (major == 1) {
    header_len = read_le(lead + 8, 2);
  } else if (major == 2 || major == 3) {
    in.read(reinterpret_cast<char*>(lead + 10), 2);
    if (in.gcount() < 2) throw InputError(path, "short file: truncated .npy header");
    header_len = read_le(lead + 8, 4);
    prefix = 12;
  } else {
    throw InputError(path, "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                               " (supported: 1.0, 2.0, 3.0)");
  }
  if (header_len > (uint64_t{1} << 24)) throw InputError(path, "bad .npy header length " + std::to_string(header_len));
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  if (static_cast<uint64_t>(in.gcount()) < header_len) throw InputError(path, "short file: truncated .npy header");

  NpyArray arr = HeaderParser(header, path).parse();
  std::vector<SizeFactor> factors(arr.shape.begin(), arr.shape.end());
  factors.emplace_back(static_cast<int64_t>(npy_item_size(arr.dtype)), "bytes");
  const std::string what = "the data of shape " + shape_text(arr.shape) + " and dtype " + npy_descr(arr.dtype);
  const uint64_t expected = static_cast<uint64_t>(checked_product(path, what, factors));
  if (check_header) check_header(arr);
  const uint64_t available = static_cast<uint64_t>(size) - prefix - header_len;
  if (available < expected) {
    throw InputError(path, "short file: expected " + std::to_string(expected) + " bytes of data, found " +
                               std::to_string(available) + " (shape " + shape_text(arr.shape) + ", dtype " +
                               npy_descr(arr.dtype) + ")");
  }
  if (available > expected) {
    throw InputError(path, "has " + std::to_string(available) + " bytes of data, but its header says " +
                               std::to_string(expected) + " (shape " + shape_text(arr.shape) + ", dtype " +
                               npy_descr(arr.dtype) + ")");
  }
  arr.data.resize(expected);
  in.seekg(static_cast<std::streamoff>(prefix + header_len));
  in.read(reinterpret_cast<char*>(arr.data.data()), static_cast<std::streamsize>(expected));
  if (static_cast<uint64_t>(in.gcount()) != expected) throw InputError(path, "cannot read the data");
  return arr;
}

std::vector<uint16_t> read_npy_as_half(const std::string& path, const std::vector<int64_t>& shape,
                                       const std::string& shape_names) {
  // Shape and dtype are checked from the header, before the data is read.
  const NpyArray arr = read_npy(path, [&](const NpyArray& header) {
    if (header.shape != shape) {
      throw InputError(path, "shape " + shape_text(header.shape) + " does not match the config's " +
                                 shape_text(shape) + (shape_names.empty() ? "" : " (" + shape_names + ")"));
    }
    if (header.dtype != NpyDtype::f16 && header.dtype != NpyDtype::f32) {
      throw InputError(path, std::string("dtype '") + npy_descr(header.dtype) +
                                 "' is not supported for attention inputs (expected float16 '<f2' or float32 '<f4')");
    }
  });
  const size_t n = arr.data.size() / npy_item_size(arr.dtype);
  std::vector<uint16_t> out(n);
  if (arr.dtype == NpyDtype::f16) {
    if (!arr.data.empty()) std::memcpy(out.data(), arr.data.data(), arr.data.size());  // no null pointers
  } else {
    const unsigned char* src = arr.data.data();
    for (size_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, src + 4 * i, 4);
      out[i] = float_to_half(f);
    }
  }
  return out;
}

void write_npy(const std::string& path, NpyDtype dtype, const std::vector<int64_t>& shape, const void* data) {
  std::string dims;
  uint64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += (i ? ", " : "") + std::to_string(shape[i]);
    count *= static_cast<uint64_t>(shape[i]);
  }
  if (shape.size() == 1) dims += ',';  // a Python 1-tuple: (5,)
  std::string header =
      std::string("{'descr': '") + npy_descr(dtype) + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Pad with spaces and end with '\n' so that the data starts on a 64-byte boundary.
  const size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  if (header.size() > 0xffff) throw InputError(path, "shape " + shape_text(shape) + " makes the .npy header too long");

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw InputError(path, std::string("cannot write file: ") + std::strerror(errno));
  unsigned char prefix[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
  prefix[8] = static_cast<unsigned char>(header.size() & 0xff);
  prefix[9] = static_cast<unsigned char>(header.size() >> 8);
  out.write(reinterpret_cast<const char*>(prefix), sizeof prefix);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(count * npy_item_size(dtype)));
  out.close();
  if (!out) throw InputError(path, std::string("cannot write file: ") + std::strerror(errno));
}

}  // namespace tilemix
