#pragma once
// Work of the persistent prefill kernel: a CTA takes work tiles t = blockIdx.x, + gridDim.x, ...
// of (query tile, query head, sequence) in the order of the non-persistent grid: query tiles
// fastest, highest first, then heads, then sequences. The CTAs running at one time then work on
// few heads, so the K/V tiles they stream are shared in L2 (with query heads or sequences fastest,
// 132 CTAs streamed 44 distinct K/V heads at 16k tokens and ran 10-18% slower than the grid), and
// under a causal mask each head's longest query tiles start first. Producer and consumers walk the
// same sequence.
#include <cstdint>

#include "kernels/prefill/params.cuh"

namespace tilemix::gpu {

struct PersistentTiles {
  int query_tiles;  // ceil(max_seqlen_q / BLOCK_M)
  int heads, batch;

  __device__ __forceinline__ int64_t count() const { return static_cast<int64_t>(query_tiles) * heads * batch; }

  // BlockInfo of tile t (false when the query tile lies past its sequence's end).
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ bool block(const KernelParams& p, int64_t t, BlockInfo& blk) const {
    const int m = query_tiles - 1 - static_cast<int>(t % query_tiles);
    const int64_t rest = t / query_tiles;
    return blk.init_at<kBlockM, kBlockN>(p, static_cast<int>(rest % heads), m, static_cast<int>(rest / heads));
  }
};

}  // namespace tilemix::gpu
