#pragma once
// Minimal .npy reader/writer (reads format 1.0/2.0/3.0, writes 1.0; little-endian, C order).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/enum_names.hpp"

namespace tilemix {

enum class NpyDtype { f16, f32, f64, i8, u64 };
// The dtypes as numpy writes them (a header's 'descr'); an INT8 array may also say '<i1'.
inline constexpr EnumName<NpyDtype> kNpyDescrs[] = {{NpyDtype::f16, "<f2"}, {NpyDtype::f32, "<f4"},
                                                    {NpyDtype::f64, "<f8"}, {NpyDtype::i8, "|i1"},
                                                    {NpyDtype::i8, "<i1"},  {NpyDtype::u64, "<u8"}};

struct NpyArray {
  NpyDtype dtype = NpyDtype::f32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> data;  // raw little-endian elements
};

// Throws InputError naming the file for a missing/short file, one that is not a regular file, a
// bad header, a shape whose byte count passes 2^63 - 1, Fortran order, or an unsupported dtype.
// `check_header`, when given, sees the dtype and shape (no data yet) before the data is read and
// throws to refuse the file without reading it.
NpyArray read_npy(const std::string& path, const std::function<void(const NpyArray&)>& check_header = {});

// Reads an FP16 or FP32 array of exactly `shape` as FP16 bits (FP32 rounds to nearest even).
// `shape_names` (e.g. "[total_q, hq, d]") explains the expected shape in errors.
std::vector<uint16_t> read_npy_as_half(const std::string& path, const std::vector<int64_t>& shape,
                                       const std::string& shape_names = "");

// "<f2", "|i1", ...: the dtype as numpy writes it.
inline const char* npy_descr(NpyDtype dtype) { return enum_name(kNpyDescrs, dtype); }
size_t npy_item_size(NpyDtype dtype);

void write_npy(const std::string& path, NpyDtype dtype, const std::vector<int64_t>& shape, const void* data);

}  // namespace tilemix
