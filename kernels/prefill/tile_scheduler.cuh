#pragma once
// The work tiles of the prefill kernels and their routes. A work tile is (query tile, query head,
// sequence); TileRouting reads its route word once, for every mainloop. The grid kernels
// (prefill_kernel.cuh) run one work tile per CTA, from the block index (BlockInfo::init).
//
// The persistent kernel (prefill_kernel_ws.cuh): a CTA takes work tiles t = blockIdx.x,
// + gridDim.x, ... (PersistentTiles::for_each). The (head, sequence) pairs are cut into sections
// of kSectionPairs consecutive heads; a section's tiles run one after another, highest query tile
// first across the section's pairs. So the CTAs running at one time stream the K/V of a few KV
// heads, which L2 holds (with query tiles slowest across all pairs, 132 CTAs streamed 44 KV heads
// at 16k tokens), and under a causal mask the longest query tiles start first and every CTA's
// tiles sweep from long to short (with query tiles fastest, a CTA's tiles repeated four query
// tile positions and the causal rows at 2k ran 10-12% longer). The producer, on_the_fly's
// quantizer warps and the consumers each walk the same sequence.
#include <cstdint>

#include "kernels/common/tile_routes.cuh"
#include "kernels/prefill/params.cuh"

namespace tilemix::gpu {

// The route word and group of a work tile (tilemix), and whether some of its key tiles are INT8.
struct TileRouting {
  uint64_t word = 0;
  int group = 1;
  bool any_int8 = false;

  template <bool kRouted>
  __device__ __forceinline__ void load(const KernelParams& p, const BlockInfo& blk) {
    if constexpr (kRouted) {
      word = p.words[static_cast<int64_t>(blk.kv_head) * p.total_query_tiles + p.tile_offset[blk.b] + blk.m];
      group = p.group[blk.b];
      any_int8 = any_int8_tile(word, group, 0, blk.key_tiles);
    }
  }
};

struct PersistentTiles {
  static constexpr int kSectionPairs = 8;
  int query_tiles;  // ceil(max_seqlen_q / BLOCK_M)
  int heads, batch;

  __device__ __forceinline__ int64_t count() const { return static_cast<int64_t>(query_tiles) * heads * batch; }

  // BlockInfo of tile t (false when the query tile lies past its sequence's end). In 32-bit
  // arithmetic where every index fits: three 64-bit divisions cost about 600 cycles of a
  // consumer warp per work tile (H100, docs/perf/prefill.md).
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ bool block(const KernelParams& p, int64_t t, BlockInfo& blk) const {
    if (count() <= static_cast<int64_t>(UINT32_MAX)) {
      return block_in<uint32_t, kBlockM, kBlockN>(p, static_cast<uint32_t>(t), blk);
    }
    return block_in<uint64_t, kBlockM, kBlockN>(p, static_cast<uint64_t>(t), blk);
  }

  template <class Index, int kBlockM, int kBlockN>
  __device__ __forceinline__ bool block_in(const KernelParams& p, Index t, BlockInfo& blk) const {
    const Index section_tiles = static_cast<Index>(kSectionPairs) * static_cast<Index>(query_tiles);
    const Index section = t / section_tiles;
    const Index first_pair = section * kSectionPairs;
    const Index pair_count = static_cast<Index>(heads) * static_cast<Index>(batch);
    const Index left = pair_count - first_pair;
    const Index pairs = left < kSectionPairs ? left : static_cast<Index>(kSectionPairs);
    const Index in_section = t - section * section_tiles;
    const int m = query_tiles - 1 - static_cast<int>(in_section / pairs);
    const Index pair = first_pair + in_section % pairs;
    const Index hs = static_cast<Index>(heads);
    return blk.init_at<kBlockM, kBlockN>(p, static_cast<int>(pair % hs), m, static_cast<int>(pair / hs));
  }

  // Work tile t's BlockInfo and, where kRouted, its route word (false when the query tile lies
  // past its sequence's end: the CTA skips it).
  template <int kBlockM, int kBlockN, bool kRouted>
  __device__ __forceinline__ bool work_tile(const KernelParams& p, int64_t t, BlockInfo& blk,
                                            TileRouting& routing) const {
    if (!block<kBlockM, kBlockN>(p, t, blk)) return false;
    routing.template load<kRouted>(p, blk);
    return true;
  }

  // This CTA's work tiles t = blockIdx.x, + gridDim.x, ... < count(), for a range-for:
  //   for (const int64_t t : tiles.of_this_cta()) {
  //     BlockInfo blk;
  //     TileRouting routing;
  //     if (!tiles.work_tile<kBlockM, kBlockN, kRouted>(p, t, blk, routing)) continue;
  //     ...
  //   }
  struct End {};
  struct Position {
    const PersistentTiles& tiles;
    int64_t t;
    __device__ __forceinline__ bool operator!=(End) const { return t < tiles.count(); }
    __device__ __forceinline__ void operator++() { t += gridDim.x; }
    __device__ __forceinline__ int64_t operator*() const { return t; }
  };
  struct ThisCta {
    const PersistentTiles& tiles;
    __device__ __forceinline__ Position begin() const { return {tiles, blockIdx.x}; }
    __device__ __forceinline__ End end() const { return {}; }
  };
  __device__ __forceinline__ ThisCta of_this_cta() const { return {*this}; }
};

}  // namespace tilemix::gpu
