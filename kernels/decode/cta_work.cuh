#pragma once
// What one decode CTA works on: its (split, KV head, head chunk) from the block index, the
// sequence that split belongs to, the query rows and the key tiles.
#include <cstdint>

#include "kernels/common/sequence_lookup.cuh"
#include "kernels/decode/params.cuh"

namespace tilemix::gpu {

// What one CTA works on.
struct DecodeBlock {
  int b, split, splits;
  int kv_head, head0, heads;  // query heads head0 .. head0 + heads - 1
  int n, len, rows;           // new tokens, cache tokens, query rows (heads * n)
  int tile_begin, tile_end;

  __device__ __forceinline__ void init(const DecodeKernelParams& p) {
    // CTAs in launch order: the KV heads (and head chunks) of split 0, then of split 1, ... The
    // CTAs reading one token range run side by side, so each 1 KB (INT8; 2 KB FP16) row of all
    // KV heads is fetched from DRAM at about the same time, not 128 bytes of it at a time.
    const int per_split = p.hk * p.head_chunks;
    const int64_t global_split = blockIdx.x / per_split;
    const int head_index = static_cast<int>(blockIdx.x % per_split);
    tile_begin = p.split_first_tile[global_split];  // loaded while the sequence is looked up
    const int next_first = p.split_first_tile[min(global_split + 1, p.total_splits - 1)];
    b = find_sequence_warp(p.split_offset, p.batch, global_split, threadIdx.x & 31);
    split = static_cast<int>(global_split - p.split_offset[b]);
    splits = static_cast<int>(p.split_offset[b + 1] - p.split_offset[b]);
    kv_head = head_index / p.head_chunks;
    const int chunk = head_index % p.head_chunks;
    head0 = kv_head * p.heads_per_kv + chunk * p.heads_per_cta;
    heads = min(p.heads_per_cta, p.heads_per_kv - chunk * p.heads_per_cta);
    n = static_cast<int>(p.cu_new[b + 1] - p.cu_new[b]);
    len = static_cast<int>(p.cache_len[b]);
    rows = heads * n;
    // A split ends where the next split of its sequence begins, the last one at the sequence's
    // last tile (DecodeSplitPlan::tile_range).
    tile_end = split + 1 < splits ? next_first : (len + kDecodeBlockN - 1) / kDecodeBlockN;
  }

  // Global token index of row r, and its query head.
  __device__ __forceinline__ int64_t token(const DecodeKernelParams& p, int r) const { return p.cu_new[b] + r / heads; }
  __device__ __forceinline__ int head(int r) const { return head0 + r % heads; }
  // Keys row r sees: key j is legal iff j < visible(r) (causal bottom-right, and the cache end).
  __device__ __forceinline__ int visible(int r) const { return min(len, r / heads + len - n + 1); }
};

}  // namespace tilemix::gpu
