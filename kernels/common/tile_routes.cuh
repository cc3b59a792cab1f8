#pragma once
// Reading a routing word on the GPU: key tile t of a (KV head, query tile) is INT8-routed when bit
// t / g of its 64-bit word is set (g tiles per group). Shared by the prefill and decode mainloops.
#include <cstdint>

namespace tilemix::gpu {

// Whether some tile of [tile_begin, tile_end) is INT8-routed.
__device__ __forceinline__ bool any_int8_tile(uint64_t word, int group, int tile_begin, int tile_end) {
  if (tile_begin >= tile_end) return false;
  const int g0 = tile_begin / group, groups = (tile_end - 1) / group - g0 + 1;
  const uint64_t live = word >> g0;
  return (groups >= 64 ? live : live & ((1ull << groups) - 1ull)) != 0;
}

// How many tiles of [tile_begin, tile_end) are FP16-routed (tiles past bit 63 count as FP16).
__device__ __forceinline__ int fp16_tile_count(uint64_t word, int group, int tile_begin, int tile_end) {
  int count = 0;
  for (int t = tile_begin; t < tile_end;) {
    const int g = t / group, next = min(tile_end, (g + 1) * group);
    if (g >= 64 || ((word >> g) & 1ull) == 0) count += next - t;
    t = next;
  }
  return count;
}

// The routes of tiles tile_begin, tile_begin + 1, ... in that order, without a division per tile
// (ncu showed the decode kernels' t / group of every tile, an integer division, in the loop): the
// word is shifted once per group of `group` tiles.
class TileRoutes {
 public:
  __device__ __forceinline__ TileRoutes(uint64_t word, int group, int tile_begin) : group_(group) {
    const int first = tile_begin / group;
    word_ = first >= 64 ? 0ull : word >> first;
    left_ = group - tile_begin % group;
  }
  // Whether the next tile is INT8-routed.
  __device__ __forceinline__ bool next() {
    const bool int8 = (word_ & 1ull) != 0;
    if (--left_ == 0) {
      left_ = group_;
      word_ >>= 1;
    }
    return int8;
  }

 private:
  uint64_t word_;
  int group_, left_;
};

}  // namespace tilemix::gpu
