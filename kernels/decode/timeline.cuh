#pragma once
// Per-CTA timestamps of the decode kernels (DecodeParams::timeline; off when null): thread 0 of a
// CTA writes its row, so a call without a timeline pays one test of a kernel parameter per stamp.
#include <cstdint>

#include "kernels/common/tile_routes.cuh"
#include "kernels/decode/params.cuh"
#include "tilemix/decode.hpp"

namespace tilemix::gpu {

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void stamp_timeline(const DecodeKernelParams& p, DecodeTimelineSlot slot) {
  if (p.timeline != nullptr && threadIdx.x == 0) {
    p.timeline[static_cast<int64_t>(blockIdx.x) * kDecodeTimelineSlots + slot] = global_ns();
  }
}

// The end stamp and what the CTA (a DecodeBlock) worked on. The routing word is loaded again here
// rather than kept in registers across the loop.
template <class Block>
__device__ __forceinline__ void finish_timeline(const DecodeKernelParams& p, const Block& blk, bool int8_cache) {
  if (p.timeline == nullptr || threadIdx.x != 0) return;
  uint64_t* row = p.timeline + static_cast<int64_t>(blockIdx.x) * kDecodeTimelineSlots;
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  row[kTimelineEnd] = global_ns();
  const int tiles = blk.tile_end - blk.tile_begin;
  row[kTimelineSm] = sm;
  row[kTimelineTiles] = static_cast<uint64_t>(tiles);
  row[kTimelineFp16Tiles] = static_cast<uint64_t>(
      int8_cache ? fp16_tile_count(p.words[static_cast<int64_t>(blk.kv_head) * p.batch + blk.b], p.group[blk.b],
                                   blk.tile_begin, blk.tile_end)
                 : tiles);
  row[kTimelineSequence] = static_cast<uint64_t>(blk.b);
  row[kTimelineSplit] = static_cast<uint64_t>(blk.split);
  row[kTimelineKvHead] = static_cast<uint64_t>(blk.kv_head);
}

}  // namespace tilemix::gpu
