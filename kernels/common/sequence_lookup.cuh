#pragma once
// The sequence an index belongs to, from ascending prefix sums (token, block or split offsets):
// a CTA of a varlen or batched grid finds its sequence this way.
#include <cstdint>

namespace tilemix::gpu {

// Largest b with offsets[b] <= x, offsets ascending with offsets[0] = 0 <= x.
__device__ __forceinline__ int find_sequence(const int64_t* offsets, int batch, int64_t x) {
  int lo = 0, hi = batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= x) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// The same, found by a whole warp (every lane calls it, with its lane index): 32 offsets per
// memory round trip instead of one dependent load per bisection step. In a decode CTA it heads
// the chain of dependent loads waited through before the first cache tile is requested.
__device__ __forceinline__ int find_sequence_warp(const int64_t* offsets, int batch, int64_t x, int lane) {
  int b = 0;
  for (int first = 0; first < batch; first += 32) {
    const bool at_or_below = first + lane < batch && offsets[first + lane] <= x;
    const unsigned below = __ballot_sync(0xffffffffu, at_or_below);  // a prefix of the lanes
    if (below != 0u) b = first + 31 - __clz(below);
    if (below != 0xffffffffu) break;
  }
  return b;
}

}  // namespace tilemix::gpu
