#pragma once
// Shared-memory tile layout and the asynchronous global -> shared tile copy.
#include <cstdint>

#include "kernels/common/mma.cuh"

namespace tilemix::gpu {

// A [kRows x kRowBytes] tile in shared memory, kept as 16-byte chunks. The chunk position within
// each 128-byte line is XOR-permuted by the line's row, so that the 8 rows that one ldmatrix
// phase reads (same logical chunk, consecutive rows) fall in 8 distinct bank groups, and the
// 16-byte cp.async writes of a warp are conflict-free too. No padding: the tile is dense.
template <int kRows_, int kRowBytes_>
struct SwizzledTile {
  static constexpr int kRows = kRows_;
  static constexpr int kRowBytes = kRowBytes_;
  static constexpr int kChunksPerRow = kRowBytes / 16;
  static constexpr int kBytes = kRows * kRowBytes;
  static_assert(kRowBytes == 64 || kRowBytes % 128 == 0, "rows of 64 bytes or whole 128-byte lines");

  // Byte offset of 16-byte chunk `chunk` of row `row`.
  __device__ __forceinline__ static uint32_t offset(int row, int chunk) {
    if constexpr (kRowBytes >= 128) {
      return row * kRowBytes + ((chunk ^ (row & 7)) << 4);
    } else {
      // Two 64-byte rows share a line; permute the line's 8 chunks by the line index.
      const int line = row >> 1;
      return (line << 7) + (((((row & 1) << 2) | chunk) ^ (line & 7)) << 4);
    }
  }

  // Rows whose swizzle phase repeats: moving by a multiple of it moves the address linearly.
  static constexpr int kRowPeriod = kRowBytes >= 128 ? 8 : 16;

  // From the address (tile 128-byte aligned) of chunk c0 in {0, 1} of some row, the address of
  // chunk c0 + chunks of the row `rows` further down; `rows` a multiple of 16 and `chunks` even.
  // One add and one XOR with constants, so nothing per step has to live in a register.
  __device__ __forceinline__ static uint32_t step(uint32_t addr, int rows, int chunks) {
    return (addr + rows * kRowBytes + (chunks >> 3) * 128) ^ ((chunks & 7) << 4);
  }
};

// Issues cp.async for rows [0, valid_rows) of a tile whose rows lie `row_stride` bytes apart in
// global memory; rows from valid_rows on are zero-filled (keys past a sequence's end then
// contribute exact zeros to P*V, and padded query rows give finite scores). Thread t copies chunk
// t % chunks_per_row of rows t / chunks_per_row + i * rows_per_pass.
template <class Tile, int kThreads>
__device__ __forceinline__ void load_tile_async(uint32_t smem_tile, const char* gmem, int64_t row_stride,
                                                int valid_rows, int tid) {
  constexpr int kRowsPerPass = kThreads / Tile::kChunksPerRow;
  static_assert(kThreads % Tile::kChunksPerRow == 0 && Tile::kRows % kRowsPerPass == 0, "whole passes");
  static_assert(kRowsPerPass % Tile::kRowPeriod == 0, "every pass keeps the swizzle phase");
  const int row0 = tid / Tile::kChunksPerRow, chunk = tid % Tile::kChunksPerRow;
  const uint32_t dst = smem_tile + Tile::offset(row0, chunk);
  const char* src = gmem + row0 * row_stride + chunk * 16;
  const int64_t pass_stride = kRowsPerPass * row_stride;
#pragma unroll
  for (int i = 0; i < Tile::kRows / kRowsPerPass; ++i) {
    const bool valid = row0 + i * kRowsPerPass < valid_rows;
    // An invalid row reads nothing; it still names an address inside the tensor.
    cp_async_16(dst + i * kRowsPerPass * Tile::kRowBytes, valid ? src : gmem, valid);
    src += pass_stride;
  }
}

}  // namespace tilemix::gpu
