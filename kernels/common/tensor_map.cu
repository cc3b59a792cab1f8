#include "kernels/common/tensor_map.hpp"

#include <cuda_runtime.h>

#include <mutex>
#include <stdexcept>

#include "kernels/common/check.cuh"

namespace tilemix::gpu {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encode_tiled(const std::string& context) {
  static EncodeTiled fn = nullptr;
  static std::once_flag once;
  static cudaError_t status = cudaSuccess;
  static cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSuccess;
  std::call_once(once, [] {
    void* p = nullptr;
    status = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found);
    fn = reinterpret_cast<EncodeTiled>(p);
  });
  TILEMIX_CUDA_CHECK(status, context);
  if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
    throw CudaError("cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)", cudaErrorSymbolNotFound, context);
  }
  return fn;
}

// A 3-d tensor map (dims innermost first, the two outer strides in bytes), no interleave, L2
// promotion by 256 bytes, no out-of-bounds fill: what every map of the kernels shares.
CUtensorMap encode_3d(const void* base, CUtensorMapDataType type, const cuuint64_t (&dims)[3],
                      const cuuint64_t (&strides)[2], const cuuint32_t (&box)[3], CUtensorMapSwizzle swizzle,
                      const std::string& context) {
  CUtensorMap map;
  const cuuint32_t element_strides[3] = {1u, 1u, 1u};
  const CUresult r = encode_tiled(context)(&map, type, 3, const_cast<void*>(base), dims, strides, box, element_strides,
                                           CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw CudaError("cuTensorMapEncodeTiled", cudaErrorInvalidValue,
                    context + " (CUresult " + std::to_string(static_cast<int>(r)) + ")");
  }
  return map;
}

}  // namespace

CUtensorMap make_head_tensor_map(const void* base, int element_bytes, int64_t tokens, int heads, int d,
                                 int64_t row_bytes, int box_rows, int box_elems, const std::string& context) {
  const int box_bytes = box_elems * element_bytes;
  if ((box_bytes != 128 && box_bytes != 64) || reinterpret_cast<uintptr_t>(base) % 16 != 0 || row_bytes % 16 != 0 ||
      (static_cast<int64_t>(d) * element_bytes) % 16 != 0 || tokens <= 0 || tokens > 0xffffffffll) {
    throw std::invalid_argument(context + ": tensor map of " + std::to_string(tokens) + " x " + std::to_string(heads) +
                                " x " + std::to_string(d) + " elements does not meet TMA's alignment and size rules");
  }
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(tokens)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(d) * element_bytes, static_cast<cuuint64_t>(row_bytes)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(box_elems), 1u, static_cast<cuuint32_t>(box_rows)};
  return encode_3d(base, element_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8, dims,
                   strides, box, box_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B, context);
}

CUtensorMap make_value_codes_tensor_map(const void* base, int64_t columns, int heads, int d,
                                        const std::string& context) {
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0 || columns % 64 != 0 || columns <= 0 || columns > 0xffffffffll ||
      d <= 0 || d > 256 || heads <= 0) {
    throw std::invalid_argument(context + ": tensor map of the V codes (" + std::to_string(heads) + " x " +
                                std::to_string(d) + " x " + std::to_string(columns) +
                                ") does not meet TMA's alignment and size rules");
  }
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(columns), static_cast<cuuint64_t>(d),
                              static_cast<cuuint64_t>(heads)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(columns), static_cast<cuuint64_t>(columns) * d};
  const cuuint32_t box[3] = {64u, static_cast<cuuint32_t>(d), 1u};
  return encode_3d(base, CU_TENSOR_MAP_DATA_TYPE_UINT8, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_64B, context);
}

}  // namespace tilemix::gpu
