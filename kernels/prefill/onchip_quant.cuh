#pragma once
// on_the_fly mode: blockwise INT8 quantization of a tile already resident in shared memory, with
// the blocks and rounding of quantize_qk (so both modes give identical codes and scales). The
// tile must hold exactly one scale block, its rows past the sequence's end zero-filled (zeros do
// not change the absmax and are never read back as codes of real tokens).
#include <cstdint>

#include "kernels/common/copy.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/quant/int8_codes.cuh"

namespace tilemix::gpu {

// An FP16 tile of kRows x 2 * kChannelBlocks * 64 bytes stored as kChannelBlocks blocks of
// 64 channels, each a SwizzledTile of 128-byte rows (wgmma's K-major 128-byte swizzle): the
// layout of the sm_90 mainloop. Chunk c of a logical row is chunk c % 8 of that row in block c / 8.
template <int kRows_, int kChannelBlocks>
struct ChannelBlockedTile {
  using Block = SwizzledTile<kRows_, 128>;
  static constexpr int kRows = kRows_;
  static constexpr int kChunksPerRow = 8 * kChannelBlocks;
  static constexpr int kRowBytes = Block::kRowBytes;  // between consecutive rows of one block
  static constexpr int kRowPeriod = Block::kRowPeriod;
  __device__ __forceinline__ static uint32_t offset(int row, int chunk) {
    return (chunk >> 3) * Block::kBytes + Block::offset(row, chunk & 7);
  }
};

// Quantizes fp16 tile `src` [kRows x kDim] (layout Src) into int8 tile `dst` [kRows x kDim] and
// returns the scale. All threads of the CTA take part; `scratch` holds one float per warp. With
// kInPlace, dst overlaps src: the codes wait in registers until every thread has read src. With
// kForAsyncProxy the codes are fenced for wgmma's reads before the closing barrier.
template <int kRows, int kDim, int kThreads, bool kInPlace, class Src = SwizzledTile<kRows, 2 * kDim>,
          bool kForAsyncProxy = false>
__device__ __forceinline__ float quantize_resident_tile(const char* src, char* dst, float* scratch, int tid) {
  using Dst = SwizzledTile<kRows, kDim>;
  // Thread t takes fp16 chunk t % chunks_per_row of rows t / chunks_per_row + i * rows_per_pass;
  // fp16 chunk c holds the 8 elements whose codes fill half of int8 chunk c / 2.
  constexpr int kRowsPerPass = kThreads / Src::kChunksPerRow;
  constexpr int kPasses = kRows / kRowsPerPass;
  static_assert(Src::kChunksPerRow == 2 * kDim / 16, "the source holds kDim halves per row");
  static_assert(kThreads % Src::kChunksPerRow == 0 && kRows % kRowsPerPass == 0, "whole passes");
  static_assert(kRowsPerPass % Src::kRowPeriod == 0 && kRowsPerPass % Dst::kRowPeriod == 0, "passes keep the swizzle");
  const int row0 = tid / Src::kChunksPerRow, chunk = tid % Src::kChunksPerRow;
  const char* src0 = src + Src::offset(row0, chunk);
  char* dst0 = dst + Dst::offset(row0, chunk >> 1) + (chunk & 1) * 8;

  float absmax = 0.0f;
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    absmax = absmax8(*reinterpret_cast<const uint4*>(src0 + i * kRowsPerPass * Src::kRowBytes), absmax);
  }
  const float scale = int8_block_scale(block_absmax<kThreads / 32>(absmax, scratch));

  const Int8Encoder encoder(scale);
  uint2 codes[kPasses];
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    codes[i] = encoder.encode8(*reinterpret_cast<const uint4*>(src0 + i * kRowsPerPass * Src::kRowBytes));
    if constexpr (!kInPlace) *reinterpret_cast<uint2*>(dst0 + i * kRowsPerPass * Dst::kRowBytes) = codes[i];
  }
  if constexpr (kInPlace) {
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kPasses; ++i) *reinterpret_cast<uint2*>(dst0 + i * kRowsPerPass * Dst::kRowBytes) = codes[i];
  }
  if constexpr (kForAsyncProxy) fence_proxy_async_shared();
  __syncthreads();
  return scale;
}

}  // namespace tilemix::gpu
