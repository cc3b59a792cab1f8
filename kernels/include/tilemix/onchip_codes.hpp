#pragma once
// The warp-specialized prefill kernel's on-chip INT8 coding (quantize_resident_half and
// quantize_resident_rows) on one block from the host, with the thread counts the kernel runs it
// with: for tests that its codes and scales are quantize_blockwise's, bit for bit.
#include <cstdint>
#include <vector>

namespace tilemix::gpu {

struct ResidentCodes {
  std::vector<int8_t> codes;  // [rows][d]; rows from `valid` on hold no token's codes
  std::vector<float> scales;  // each coding group's: every consumer warpgroup finds the block's scale itself
};

// Codes of `x`, FP16 [rows][d] row-major, of which rows 0 .. valid - 1 are the block's tokens
// (0 < valid <= rows): rows 128 is a query tile coded by the two consumer warpgroups, each its own
// 64 rows (Q8), rows 64 a routing tile's keys coded by the three quantizer warps (on_the_fly's
// K8); d 64 or 128.
// Throws std::invalid_argument for other shapes, CudaError for CUDA failures.
ResidentCodes code_resident_rows(const std::vector<uint16_t>& x, int rows, int d, int valid);

}  // namespace tilemix::gpu
