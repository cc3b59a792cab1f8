#pragma once
// Legality of (query, key) pairs: sequence bounds and the bottom-right causal rule (query i sees
// key j iff j <= i + lk - lq). Decided here from the sequence lengths alone, never from the
// routing words. Whole tiles past the legal range are skipped by the mainloop (key_tiles); this
// file masks elements inside the tiles that straddle the diagonal or the sequence end.
#include <cmath>

#include "kernels/prefill/params.cuh"

namespace tilemix::gpu {

template <class Cfg>
struct TileMask {
  // True when key tile n holds an illegal pair for some row of the query tile. The first row of
  // the tile sees the fewest keys, so the test against it covers every row.
  __device__ __forceinline__ static bool needed(const BlockInfo& blk, int n, bool causal) {
    const int last_key = (n + 1) * Cfg::kBlockN - 1;
    if (last_key >= blk.lk) return true;
    return causal && last_key > blk.row_begin<Cfg::kBlockM>() + blk.diagonal();
  }

  // Sets s = -inf for illegal elements of key tile n. s holds this thread's fragments of the
  // warp's rows: [row slice][n8 fragment][c0..c3] (c0, c1 on row lane/4, c2, c3 eight rows down).
  __device__ __forceinline__ static void apply(float (&s)[Cfg::kRowSlices][Cfg::kKeyFrags][4], const BlockInfo& blk,
                                               int n, bool causal, int warp, int lane) {
    const int key0 = n * Cfg::kBlockN;
    const int warp_row0 = blk.row_begin<Cfg::kBlockM>() + warp * Cfg::kWarpRows + (lane >> 2);
    const int col0 = 2 * (lane & 3);
#pragma unroll
    for (int mi = 0; mi < Cfg::kRowSlices; ++mi) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = warp_row0 + mi * 16 + half * 8;
        // row + diagonal + 1 <= lk for real rows; padded rows (row >= lq) are never stored.
        const int visible = causal ? min(blk.lk, row + blk.diagonal() + 1) : blk.lk;
        const int legal = visible - key0;  // columns [0, legal) of this tile are legal
#pragma unroll
        for (int ni = 0; ni < Cfg::kKeyFrags; ++ni) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            if (ni * 8 + col0 + e >= legal) s[mi][ni][half * 2 + e] = -INFINITY;
          }
        }
      }
    }
  }
};

}  // namespace tilemix::gpu
