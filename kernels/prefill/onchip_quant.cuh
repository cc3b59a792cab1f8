#pragma once
// Blockwise INT8 quantization of a tile already resident in shared memory, with the blocks and
// rounding of quantize_queries and quantize_keys (so that codes and scales are the passes'
// however they are made): quantize_resident_tile for the older kernels' on_the_fly (the tile
// holds exactly one scale block, its rows past the sequence's end zero-filled: zeros do not change
// the absmax and are never read back as codes of real tokens), and for the warp-specialized kernel
// (rows past the block's tokens left out of the absmax) quantize_resident_rows (the quantizer
// warps' K8) and quantize_resident_half (each consumer warpgroup its half of Q8).
#include <cstdint>

#include "kernels/common/copy.cuh"
#include "kernels/common/pipeline.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/quant/int8_codes.cuh"

namespace tilemix::gpu {

// The FP16 chunk (16 bytes: 8 channels) `chunk` (>= 0) of row `row` of a tile stored as blocks of
// 64 channels `block_bytes` apart, each of 128-byte rows in wgmma's K-major 128-byte swizzle: chunk
// c of a logical row is chunk c % 8 of that row in block c / 8.
__device__ __forceinline__ uint32_t channel_blocked_offset(int row, int chunk, int block_bytes) {
  return (chunk >> 3) * block_bytes + sw128_offset(row, (chunk & 7) * 16);
}

// An FP16 tile of kRows x 2 * kChannelBlocks * 64 bytes in that layout, with its blocks
// SwizzledTiles of 128-byte rows one after another: the layout of the sm_90 mainloop.
template <int kRows_, int kChannelBlocks>
struct ChannelBlockedTile {
  using Block = SwizzledTile<kRows_, 128>;
  static constexpr int kRows = kRows_;
  static constexpr int kChunksPerRow = 8 * kChannelBlocks;
  static constexpr int kRowBytes = Block::kRowBytes;  // between consecutive rows of one block
  static constexpr int kRowPeriod = Block::kRowPeriod;
  __device__ __forceinline__ static uint32_t offset(int row, int chunk) {
    return channel_blocked_offset(row, chunk, Block::kBytes);
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

// The block's scale from each thread's partial absmax `m`: the kThreads threads (`tid` 0 ..
// kThreads - 1, whole warps) meet at named barrier `barrier_id`; `scratch` holds one float per warp
// and must not be written again before the group's next barrier.
template <int kThreads>
__device__ __forceinline__ float group_block_scale(float m, int tid, float* scratch, unsigned barrier_id) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if ((tid & 31) == 0) scratch[tid >> 5] = m;
  named_barrier_sync(barrier_id, kThreads);
  float absmax = scratch[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) absmax = fmaxf(absmax, scratch[w]);
  return int8_block_scale(absmax);
}

// Codes of `src` [kRows x kDim FP16: kDim / 64 channel blocks `src_block_bytes` apart, each of
// 128-byte rows in the 128-byte swizzle] into `dst` [kRows x kDim INT8, int8_rows_offset] by any
// number of warps on few registers (the quantizer warps: one chunk at a time, read twice); returns
// the scale. Rows from `valid` on belong to no token of the block (another sequence's, or past the
// tensor): they do not enter the absmax, and their codes are never read as real tokens'. The
// kThreads threads (`tid` 0 .. kThreads - 1, whole warps) meet at named barrier `barrier_id`;
// `scratch` holds one float per warp. The codes are fenced for wgmma's reads before the return.
template <int kRows, int kDim, int kThreads>
__device__ __forceinline__ float quantize_resident_rows(const char* src, int src_block_bytes, char* dst, int valid,
                                                        int tid, float* scratch, unsigned barrier_id) {
  constexpr int kChunksPerRow = kDim / 8;  // 16-byte FP16 chunks: 8 channels, 8 codes each
  const auto source = [&](int i) {
    return *reinterpret_cast<const uint4*>(src + channel_blocked_offset(i / kChunksPerRow, i % kChunksPerRow,
                                                                        src_block_bytes));
  };
  float m = 0.0f;
#pragma unroll 1
  for (int i = tid; i < valid * kChunksPerRow; i += kThreads) m = absmax8(source(i), m);
  const Int8Encoder encoder(group_block_scale<kThreads>(m, tid, scratch, barrier_id));
#pragma unroll 1
  for (int i = tid; i < kRows * kChunksPerRow; i += kThreads) {
    const int row = i / kChunksPerRow, chunk = i % kChunksPerRow;
    *reinterpret_cast<uint2*>(dst + int8_rows_offset<kDim>(row, chunk * 8)) = encoder.encode8(source(i));
  }
  fence_proxy_async_shared();
  named_barrier_sync(barrier_id, kThreads);  // scratch is free again, and every warp's codes are written
  return encoder.scale();
}

// Codes half of the kRows-row block `src` (laid out as for quantize_resident_rows), rows [row0,
// row0 + kRows / 2), into the same rows of `dst`, and returns the scale of the whole block (its
// first `valid` rows enter the absmax). Each of two groups of kThreads threads (`tid` 0 ..
// kThreads - 1, whole warps: a consumer warpgroup) reads the whole block for the absmax (a maximum
// is exact in any order, so both find the same scale) and codes its own half alone: the groups
// never wait for each other. A thread takes one chunk of rows first, first + kRowStep, ...: steps
// of 8 rows keep both swizzles' phase, so each half is one base address and compile-time offsets,
// and every load is issued before the first is used. The maxima stay in half precision until the
// shuffles; the codes form one branch-free chain and one test for near-ties, whose chunks are
// coded again from shared memory by correctly rounded divisions in a loop that is not unrolled
// (rare, and the function is run once per work tile: its code is fetched cold each time). The
// group meets at named barrier `barrier_id` (`scratch`: one float per warp of the group) after the
// absmax and once its codes are fenced for wgmma's reads.
template <int kRows, int kDim, int kThreads>
__device__ __forceinline__ float quantize_resident_half(const char* src, int src_block_bytes, char* dst, int valid,
                                                        int row0, int tid, float* scratch, unsigned barrier_id) {
  constexpr int kChunksPerRow = kDim / 8;
  constexpr int kRowStep = kThreads / kChunksPerRow;
  constexpr int kPasses = kRows / 2 / kRowStep;  // chunks per thread in each half
  static_assert(kThreads % kChunksPerRow == 0 && kRowStep % 8 == 0 && kRows / 2 % kRowStep == 0,
                "whole passes that keep the swizzles' phase");
  const int first = tid / kChunksPerRow, chunk = tid % kChunksPerRow;
  const int other0 = kRows / 2 - row0;
  const char* own_src = src + channel_blocked_offset(row0 + first, chunk, src_block_bytes);
  const char* other_src = src + channel_blocked_offset(other0 + first, chunk, src_block_bytes);
  const auto at = [](const char* base, int i) { return *reinterpret_cast<const uint4*>(base + i * kRowStep * 128); };
  uint4 own[kPasses];
  __half2 m = __float2half2_rn(0.0f);
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const uint4 x = at(other_src, i);
    if (other0 + first + i * kRowStep < valid) m = absmax8_half2(x, m);
  }
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    own[i] = at(own_src, i);
    if (row0 + first + i * kRowStep < valid) m = absmax8_half2(own[i], m);
  }
  const Int8Encoder encoder(group_block_scale<kThreads>(half2_max(m), tid, scratch, barrier_id));
  char* own_dst = dst + int8_rows_offset<kDim>(row0 + first, chunk * 8);
  uint32_t near_ties = 0;  // bit i: chunk i holds a near-tie
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    bool near_tie = false;
    const uint2 codes = make_uint2(encoder.encode4_unchecked(own[i].x, own[i].y, near_tie),
                                   encoder.encode4_unchecked(own[i].z, own[i].w, near_tie));
    *reinterpret_cast<uint2*>(own_dst + i * kRowStep * kDim) = codes;
    near_ties |= static_cast<uint32_t>(near_tie) << i;
  }
#pragma unroll 1
  for (; near_ties != 0; near_ties &= near_ties - 1) {
    const int i = __ffs(near_ties) - 1;
    const uint4 x = at(own_src, i);
    *reinterpret_cast<uint2*>(own_dst + i * kRowStep * kDim) =
        make_uint2(encoder.encode4_exact(x.x, x.y), encoder.encode4_exact(x.z, x.w));
  }
  fence_proxy_async_shared();
  named_barrier_sync(barrier_id, kThreads);  // scratch is free again, and the group's codes are written
  return encoder.scale();
}

}  // namespace tilemix::gpu
