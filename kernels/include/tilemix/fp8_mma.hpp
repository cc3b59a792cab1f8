#pragma once
// One FP8 tensor-core product as the FP8 P V path issues it (wgmma m64n64k32, E4M3 A from
// registers and B from shared memory, FP32 accumulators), on operands from the host: for tests
// of what its accumulator keeps and of the operand layouts.
#include <cstdint>
#include <vector>

namespace tilemix::gpu {

// D[r][n] = sum_k A[r][k] B[n][k] (+ C[r][n] when `accumulate`): A and B E4M3 codes, A [64][32],
// B [64][32] (row n holds column n of the product's B), C and D FP32 [64][64], row-major.
// Throws std::invalid_argument for other sizes, CudaError for CUDA failures.
std::vector<float> fp8_mma_m64n64k32(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                                     const std::vector<float>& c, bool accumulate);

}  // namespace tilemix::gpu
