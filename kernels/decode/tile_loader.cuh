#pragma once
// The cp.async loads of the decode kernels' cache tiles (K, V and, for the INT8 cache, the two
// block scales), in ascending tile order, into swizzled shared-memory stages.
#include <cstdint>

#include "kernels/common/copy.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/decode/cta_work.cuh"
#include "kernels/decode/params.cuh"

namespace tilemix::gpu {

// The cache tiles of a CTA, issued in ascending order: issue_next() sends K, V (and for the
// INT8 cache the two block scales) of the next tile as one cp.async group's worth; rows past the
// cache end are zero-filled, so V contributes exact zeros there. Thread t copies chunk
// t % chunks_per_row of rows t / chunks_per_row + i * kRowsPerPass. The pointers advance by a
// tile per call and only the sequence's last tile takes the predicated path, so a full tile costs
// its cp.async and a 64-bit add per pass (the per-tile address arithmetic was about 80
// instructions per thread and tile: docs/perf/decode.md, decode v7).
template <class Tile, int kThreads, bool kInt8>
struct DecodeTileLoader {
  static constexpr int kRowsPerPass = kThreads / Tile::kChunksPerRow;
  static constexpr int kPasses = Tile::kRows / kRowsPerPass;
  static_assert(kThreads % Tile::kChunksPerRow == 0 && Tile::kRows % kRowsPerPass == 0, "whole passes");
  static_assert(kRowsPerPass % Tile::kRowPeriod == 0, "every pass keeps the swizzle phase");

  const char* k_tile;  // row 0 of the next tile (always inside the cache: the tile has a valid row)
  const char* v_tile;
  const float* k_scale;
  const float* v_scale;
  int64_t thread_offset, pass_stride, tile_stride, row_stride;
  uint32_t smem_offset;  // the thread's first chunk within a tile in shared memory
  int tile_rows;         // cache rows from row 0 of the next tile to the sequence's end
  int last_row;          // the thread's last row within a tile
  int tid, hk;
  bool copies_scales;    // thread 0 sends the two block scales of the INT8 cache

  __device__ __forceinline__ DecodeTileLoader(const DecodeKernelParams& p, const DecodeBlock& blk, int tid_)
      : tid(tid_) {
    const int row0 = tid / Tile::kChunksPerRow, chunk = tid % Tile::kChunksPerRow;
    const int64_t first_row = p.cu_capacity[blk.b] + static_cast<int64_t>(blk.tile_begin) * kDecodeBlockN;
    const int64_t offset = first_row * p.cache_row_bytes + static_cast<int64_t>(blk.kv_head) * Tile::kRowBytes;
    const int64_t first_scale = (p.cu_blocks[blk.b] + blk.tile_begin) * p.hk + blk.kv_head;
    k_tile = p.k + offset;
    v_tile = p.v + offset;
    k_scale = kInt8 ? p.k_scale + first_scale : nullptr;
    v_scale = kInt8 ? p.v_scale + first_scale : nullptr;
    thread_offset = row0 * p.cache_row_bytes + chunk * 16;
    pass_stride = kRowsPerPass * p.cache_row_bytes;
    tile_stride = kDecodeBlockN * p.cache_row_bytes;
    row_stride = p.cache_row_bytes;
    smem_offset = Tile::offset(row0, chunk);
    tile_rows = blk.len - blk.tile_begin * kDecodeBlockN;
    last_row = row0 + (kPasses - 1) * kRowsPerPass;
    hk = p.hk;
    copies_scales = kInt8 && tid == 0;
  }

  __device__ __forceinline__ void issue_next(uint32_t k_dst, uint32_t v_dst, uint32_t scales_dst) {
    if (last_row < tile_rows) {
      const char* k_src = k_tile + thread_offset;
      const char* v_src = v_tile + thread_offset;
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        cp_async_16(k_dst + smem_offset + i * kRowsPerPass * Tile::kRowBytes, k_src + i * pass_stride, true);
        cp_async_16(v_dst + smem_offset + i * kRowsPerPass * Tile::kRowBytes, v_src + i * pass_stride, true);
      }
    } else {
      load_tile_async<Tile, kThreads>(k_dst, k_tile, row_stride, tile_rows, tid);
      load_tile_async<Tile, kThreads>(v_dst, v_tile, row_stride, tile_rows, tid);
    }
    if (copies_scales) {
      cp_async_4(scales_dst, k_scale);
      cp_async_4(scales_dst + 4, v_scale);
    }
    k_tile += tile_stride;
    v_tile += tile_stride;
    if constexpr (kInt8) {
      k_scale += hk;
      v_scale += hk;
    }
    tile_rows -= kDecodeBlockN;
  }
};

}  // namespace tilemix::gpu
