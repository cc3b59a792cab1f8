#pragma once
// on_the_fly on the warp-specialized mainloop: INT8 codes of a Q tile or a K routing tile that TMA
// has brought into shared memory, made by the producer warpgroup's quantizer warps off the
// consumers' path, with the blocks and rounding of quantize_qk (absmax over the block's rows in
// the sequence, int8_block_scale, Int8Encoder), so that both modes give identical codes and scales.
#include <cstdint>

#include "kernels/common/pipeline.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/quant/int8_codes.cuh"

namespace tilemix::gpu {

// Codes of `src` [kRows x kDim FP16: kDim / 64 channel blocks `src_block_bytes` apart, each of
// 128-byte rows in the 128-byte swizzle] into `dst` [kRows x kDim INT8, int8_rows_offset]; returns
// the scale. Rows from `valid` on belong to no token of the block (another sequence's, or past
// the tensor): they do not enter the absmax, and their codes are never read as real tokens'. The
// kThreads threads (`tid` 0 .. kThreads - 1, whole warps) meet at named barrier `barrier_id`;
// `scratch` holds one float per warp. The codes are fenced for wgmma's reads before the return.
template <int kRows, int kDim, int kThreads>
__device__ __forceinline__ float quantize_resident_rows(const char* src, int src_block_bytes, char* dst, int valid,
                                                        int tid, float* scratch, unsigned barrier_id) {
  constexpr int kChunksPerRow = kDim / 8;  // 16-byte FP16 chunks: 8 channels, 8 codes each
  constexpr int kChunks = kRows * kChunksPerRow;
  const auto source = [&](int i) {
    const int row = i / kChunksPerRow, chunk = i % kChunksPerRow;
    return *reinterpret_cast<const uint4*>(src + (chunk / 8) * src_block_bytes + sw128_offset(row, (chunk % 8) * 16));
  };
  float m = 0.0f;
#pragma unroll 1
  for (int i = tid; i < valid * kChunksPerRow; i += kThreads) m = absmax8(source(i), m);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if ((tid & 31) == 0) scratch[tid >> 5] = m;
  named_barrier_sync(barrier_id, kThreads);
  float absmax = scratch[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) absmax = fmaxf(absmax, scratch[w]);
  const float scale = int8_block_scale(absmax);

  const Int8Encoder encoder(scale);
#pragma unroll 1
  for (int i = tid; i < kChunks; i += kThreads) {
    const int row = i / kChunksPerRow, chunk = i % kChunksPerRow;
    *reinterpret_cast<uint2*>(dst + int8_rows_offset<kDim>(row, chunk * 8)) = encoder.encode8(source(i));
  }
  fence_proxy_async_shared();
  named_barrier_sync(barrier_id, kThreads);  // scratch is free again, and every warp's codes are written
  return scale;
}

}  // namespace tilemix::gpu
