#pragma once
// The work tiles of the prefill kernels and their routes. A work tile is (query tile, query head,
// sequence); TileRouting reads its route word once, for every mainloop. The grid kernels
// (prefill_kernel.cuh) run one work tile per CTA, from the block index (BlockInfo::init).
//
// The persistent kernel (prefill_kernel_ws.cuh): its producer takes the CTA's work tiles, tile
// blockIdx.x first, then with the launch's counters the next tile no CTA has taken yet, claimed
// once it issued the copies of its current tile's last step (PersistentTiles::take), so a CTA
// that drew short causal tiles takes more; without them tile t + gridDim.x. It hands each tile to
// the consumers and quantizers through shared memory (WorkTileSlot). The (head, sequence) pairs are
// cut into sections of kSectionPairs consecutive heads; a section's tiles run one after another,
// highest query tile first across the section's pairs. So the CTAs running at one time stream the
// K/V of a few KV heads, which L2 holds (with query tiles slowest across all pairs, 132 CTAs
// streamed 44 KV heads at 16k tokens), and under a causal mask the longest query tiles start first
// (with query tiles fastest, a CTA's tiles repeated four query tile positions and the causal rows
// at 2k ran 10-12% longer). With the static stride alone one CTA drew up to 1.2x the mean work
// under a causal mask at 1k-2k (132 CTAs, 8 x 24 heads: scripts/work_tile_balance.py; the
// measurement: docs/perf/prefill.md).
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

// The persistent kernel's work tiles: where they lie (block) and which one a CTA takes next.
struct PersistentTiles {
  static constexpr int kSectionPairs = 8;
  int query_tiles;  // ceil(max_seqlen_q / BLOCK_M)
  int heads, batch;
  // The launch's two counters (PrefillParams::work_tile_counters): take() calls (a launch ends
  // with count() of them: the tiles past the first gridDim.x and each CTA's last, past the end),
  // and CTAs done. Null: the static stride.
  unsigned long long* counters;

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

  // The producer's walk (one thread per CTA): first(), then per tile the next one, the static
  // order's (t + gridDim.x) or with counters the one take() claims once the tile's copies are
  // issued, until a tile >= count(); then finish(). Every CTA's last take() is past the end, so a
  // launch takes count() values of the first counter in all.
  __device__ __forceinline__ int64_t first() const { return blockIdx.x; }
  __device__ __forceinline__ bool dynamic() const { return counters != nullptr; }
  // The next tile no CTA has claimed, or count() once all are: a counter that was not zero at the
  // launch skips tiles (within a few claims of 2^64 it wraps, and tiles run again) but never
  // yields an index outside them.
  __device__ __forceinline__ int64_t take() const {
    const int64_t grid = gridDim.x;
    const unsigned long long left = count() > grid ? static_cast<unsigned long long>(count() - grid) : 0ull;
    const unsigned long long taken = atomicAdd(counters, 1ull);
    return taken < left ? grid + static_cast<int64_t>(taken) : count();
  }
  // After the CTA's last take(): the CTA that finishes last puts both counters back to zero for
  // the next launch (every other CTA took its last tile before it counted itself done).
  __device__ __forceinline__ void finish() const {
    if (counters == nullptr) return;
    __threadfence();
    if (atomicAdd(counters + 1, 1ull) == static_cast<unsigned long long>(gridDim.x) - 1ull) {
      __threadfence();
      atomicExch(counters, 0ull);
      atomicExch(counters + 1, 0ull);
    }
  }
};

// A work tile as the producer hands it to the consumers and the quantizers, in shared memory:
// written before Q's commit, read after Q's wait, overwritten once every reader released Q. `end`
// marks the end of the CTA's tiles (no Q copy comes with it).
struct WorkTileSlot {
  BlockInfo blk;
  TileRouting routing;
  int end;
};

}  // namespace tilemix::gpu
