#pragma once
// Host side of the TMA copies: tensor maps of the [tokens, heads, d] tensors the attention kernels
// read, encoded through the driver's cuTensorMapEncodeTiled (looked up through the runtime, so the
// binaries keep linking the CUDA runtime alone). Include from CUDA sources only.
#include <cuda.h>

#include <cstdint>
#include <string>

namespace tilemix::gpu {

// A [tokens, heads, d] tensor of `element_bytes`-byte elements (2: FP16, 1: INT8 codes), rows
// `row_bytes` apart (heads * d * element_bytes for a packed tensor), read in boxes of
// `box_rows` tokens x one head x `box_elems` channels, rows of box_elems * element_bytes = 128
// or 64 bytes in the swizzle of that width (the wgmma operand layouts of kernels/common/wgmma.cuh).
// Rows past `tokens` read as zeros. `context` names the call in errors.
CUtensorMap make_head_tensor_map(const void* base, int element_bytes, int64_t tokens, int heads, int d,
                                 int64_t row_bytes, int box_rows, int box_elems, const std::string& context);

// The FP8 V codes of pv fp8 / routed (core/quant_fp8.hpp's layout: [heads][d][columns] bytes), read
// in boxes of 64 keys x all d channels of one head: rows of 64 bytes in the 64-byte swizzle, the
// K-major B operand of the FP8 P V product.
CUtensorMap make_value_codes_tensor_map(const void* base, int64_t columns, int heads, int d, const std::string& context);

}  // namespace tilemix::gpu
