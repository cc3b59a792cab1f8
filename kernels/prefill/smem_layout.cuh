#pragma once
// Shared-memory plan of one prefill CTA:
//   [Q fp16 128 x d][stage 0: K, V][stage 1: K, V][Q8 128 x d, routed kernels only]
// A K slot holds the fp16 K tile, or the K8 tile of an INT8-routed key tile (quantize_once loads
// K8 into it; on_the_fly quantizes the fp16 tile into it in place). The epilogue stages O in the
// Q slot. On-chip quantization keeps its per-warp partial maxima after the tiles.
#include <cstdint>

#include "kernels/common/copy.cuh"
#include "kernels/common/mma.cuh"

namespace tilemix::gpu {

template <class Cfg, bool kRouted>
struct PrefillSmem {
  using QTile = SwizzledTile<Cfg::kBlockM, 2 * Cfg::kHeadDim>;
  using Q8Tile = SwizzledTile<Cfg::kBlockM, Cfg::kHeadDim>;
  using KTile = SwizzledTile<Cfg::kBlockN, 2 * Cfg::kHeadDim>;
  using K8Tile = SwizzledTile<Cfg::kBlockN, Cfg::kHeadDim>;
  using VTile = KTile;
  using OTile = QTile;

  // Two stages: the K/V tile n + 1 lands while tile n is computed.
  static constexpr int kStages = 2;
  static constexpr int kQ = 0;
  static constexpr int kStageBytes = KTile::kBytes + VTile::kBytes;
  static constexpr int kFirstStage = kQ + QTile::kBytes;
  static constexpr int kQ8 = kFirstStage + kStages * kStageBytes;
  static constexpr int kScratch = kQ8 + (kRouted ? Q8Tile::kBytes : 0);  // per-warp floats
  static constexpr int kBytes = kScratch + (kRouted ? 128 : 0);
  // The swizzle steps XOR address bits, so tiles start 128-byte aligned; the kernel aligns the
  // dynamic shared memory base at run time, hence the slack.
  static constexpr int kAllocBytes = kBytes + 128;
  static_assert(QTile::kBytes % 128 == 0 && KTile::kBytes % 128 == 0 && Q8Tile::kBytes % 128 == 0, "aligned tiles");

  __device__ __forceinline__ static char* align(char* raw) {
    const uint32_t misalign = smem_address(raw) & 127u;
    return raw + ((128u - misalign) & 127u);
  }

  __device__ __forceinline__ static int k(int stage) { return kFirstStage + stage * kStageBytes; }
  __device__ __forceinline__ static int v(int stage) { return k(stage) + KTile::kBytes; }
};

}  // namespace tilemix::gpu
