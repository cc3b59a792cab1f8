#pragma once
// Blockwise symmetric INT8 quantization on the CPU (SPEC 5), bit-identical to the GPU kernels.
#include <cstdint>
#include <vector>

namespace tilemix {

constexpr int kBlockQ = 128;  // BLKQ: query tokens per scale block
constexpr int kBlockK = 64;   // BLKK: key tokens per scale block

// scale = max|x| / 127 in FP32 (correctly rounded division).
inline float int8_scale(float absmax) { return absmax / 127.0f; }

// Code of x under `scale`: round-to-nearest-even of x / scale (correctly rounded FP32 division,
// no reciprocal multiply), clamped to [-127, 127]; 0 for an all-zero block (scale 0).
int8_t int8_code(float x, float scale);

// Codes have the layout of the input ([total, heads, d]); scales are [sum_b ceil(L_b/blk), heads]
// with block_offset[b] the first scale row of sequence b (B+1 entries).
struct QuantizedTensor {
  int heads = 0;
  int d = 0;
  int blk = 0;
  std::vector<int8_t> codes;
  std::vector<float> scales;
  std::vector<int64_t> block_offset;

  float scale(int b, int64_t token_in_seq, int h) const {
    return scales[(block_offset[b] + token_in_seq / blk) * heads + h];
  }
};

// Scale-block prefix sums for sequences given by `cu_seqlens` (blocks restart at each sequence).
std::vector<int64_t> scale_block_offsets(const std::vector<int64_t>& cu_seqlens, int blk);

// x: FP16 bits, [total, heads, d]. Uses both cores.
QuantizedTensor quantize_blockwise(const std::vector<uint16_t>& x, const std::vector<int64_t>& cu_seqlens,
                                   int heads, int d, int blk);

}  // namespace tilemix
