#pragma once
// Blockwise INT8 quantization of a tile already resident in shared memory, with the blocks and
// rounding of quantize_queries and quantize_keys (so that codes and scales are the passes'
// however they are made): quantize_resident_tile for the older kernels' on_the_fly (the tile
// holds exactly one scale block, its rows past the sequence's end zero-filled: zeros do not change
// the absmax and are never read back as codes of real tokens), quantize_resident_rows for the
// warp-specialized kernel (rows past the block's tokens are left out of the absmax).
#include <cstdint>

#include "kernels/common/copy.cuh"
#include "kernels/common/pipeline.cuh"
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
  const auto block_scale = [&](float m) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if ((tid & 31) == 0) scratch[tid >> 5] = m;
    named_barrier_sync(barrier_id, kThreads);
    float absmax = scratch[0];
#pragma unroll
    for (int w = 1; w < kThreads / 32; ++w) absmax = fmaxf(absmax, scratch[w]);
    return int8_block_scale(absmax);
  };
  float scale;
  if constexpr (kThreads % kChunksPerRow == 0 && (kThreads / kChunksPerRow) % 8 == 0 &&
                kRows % (kThreads / kChunksPerRow) == 0) {
    // Whole passes (the consumer warpgroups): a thread takes one chunk of rows row0, row0 +
    // kRowStep, ...; steps of 8 rows keep both swizzles' phase, so one base address each, and
    // the unrolled loads of a pass are issued before the first is used.
    constexpr int kRowStep = kThreads / kChunksPerRow;
    const int row0 = tid / kChunksPerRow, chunk = tid % kChunksPerRow;
    const char* src0 = src + (chunk / 8) * src_block_bytes + sw128_offset(row0, (chunk % 8) * 16);
    char* dst0 = dst + int8_rows_offset<kDim>(row0, chunk * 8);
    const auto at = [&](int j) { return *reinterpret_cast<const uint4*>(src0 + j * kRowStep * 128); };
    float m = 0.0f;
#pragma unroll
    for (int j = 0; j < kRows / kRowStep; ++j) {
      if (row0 + j * kRowStep < valid) m = absmax8(at(j), m);
    }
    scale = block_scale(m);
    const Int8Encoder encoder(scale);
#pragma unroll
    for (int j = 0; j < kRows / kRowStep; ++j) {
      *reinterpret_cast<uint2*>(dst0 + j * kRowStep * kDim) = encoder.encode8(at(j));
    }
  } else {
    // Any number of warps on few registers (the quantizer warps): one chunk at a time, read twice.
    const auto source = [&](int i) {
      const int row = i / kChunksPerRow, chunk = i % kChunksPerRow;
      return *reinterpret_cast<const uint4*>(src + (chunk / 8) * src_block_bytes +
                                             sw128_offset(row, (chunk % 8) * 16));
    };
    float m = 0.0f;
#pragma unroll 1
    for (int i = tid; i < valid * kChunksPerRow; i += kThreads) m = absmax8(source(i), m);
    scale = block_scale(m);
    const Int8Encoder encoder(scale);
#pragma unroll 1
    for (int i = tid; i < kRows * kChunksPerRow; i += kThreads) {
      const int row = i / kChunksPerRow, chunk = i % kChunksPerRow;
      *reinterpret_cast<uint2*>(dst + int8_rows_offset<kDim>(row, chunk * 8)) = encoder.encode8(source(i));
    }
  }
  fence_proxy_async_shared();
  named_barrier_sync(barrier_id, kThreads);  // scratch is free again, and every warp's codes are written
  return scale;
}

}  // namespace tilemix::gpu
