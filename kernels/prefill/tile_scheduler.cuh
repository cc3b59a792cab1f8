#pragma once
// Work of the persistent prefill kernel: a CTA takes work tiles t = blockIdx.x, + gridDim.x, ...
// of (query tile, query head, sequence). The (head, sequence) pairs are cut into sections of
// kSectionPairs consecutive heads; a section's tiles run one after another, highest query tile
// first across the section's pairs. So the CTAs running at one time stream the K/V of a few KV
// heads, which L2 holds (with query tiles slowest across all pairs, 132 CTAs streamed 44 KV heads
// at 16k tokens), and under a causal mask the longest query tiles start first and every CTA's
// tiles sweep from long to short (with query tiles fastest, a CTA's tiles repeated four query
// tile positions and the causal rows at 2k ran 10-12% longer). The producer, on_the_fly's
// quantizer warps and the consumers walk the same sequence.
#include <cstdint>

#include "kernels/prefill/params.cuh"

namespace tilemix::gpu {

struct PersistentTiles {
  static constexpr int kSectionPairs = 8;
  int query_tiles;  // ceil(max_seqlen_q / BLOCK_M)
  int heads, batch;

  __device__ __forceinline__ int64_t count() const { return static_cast<int64_t>(query_tiles) * heads * batch; }

  // BlockInfo of tile t (false when the query tile lies past its sequence's end).
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ bool block(const KernelParams& p, int64_t t, BlockInfo& blk) const {
    const int64_t section_tiles = static_cast<int64_t>(kSectionPairs) * query_tiles;
    const int64_t section = t / section_tiles;
    const int pairs = static_cast<int>(min(static_cast<int64_t>(kSectionPairs),
                                           static_cast<int64_t>(heads) * batch - section * kSectionPairs));
    const int64_t in_section = t - section * section_tiles;
    const int m = query_tiles - 1 - static_cast<int>(in_section / pairs);
    const int64_t pair = section * kSectionPairs + in_section % pairs;
    return blk.init_at<kBlockM, kBlockN>(p, static_cast<int>(pair % heads), m, static_cast<int>(pair / heads));
  }
};

}  // namespace tilemix::gpu
