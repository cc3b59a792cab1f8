#pragma once
// Work of the persistent prefill kernel: a CTA takes work tiles t = blockIdx.x, + gridDim.x, ...
// of (query tile, query head, sequence). Tiles are ordered highest query tile first, as the
// non-persistent grid runs them: under a causal mask those carry the most keys, so the longest
// work starts first and the last round is short. Producer and consumers walk the same sequence.
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
    const int64_t per_m = static_cast<int64_t>(heads) * batch;
    const int m = query_tiles - 1 - static_cast<int>(t / per_m);
    const int rest = static_cast<int>(t % per_m);
    return blk.init_at<kBlockM, kBlockN>(p, rest / batch, m, rest % batch);
  }
};

}  // namespace tilemix::gpu
