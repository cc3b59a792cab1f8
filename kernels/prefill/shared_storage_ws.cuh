#pragma once
// The shared memory of one CTA of the warp-specialized prefill kernel: every buffer's offset from
// the base (aligned to 1024 bytes at run time: the swizzles' address bits), in this order:
//
//   buffer      what it holds                                               present in
//   Q           d / 64 blocks of 64 channels: 128 rows of 128 bytes          all
//   Q8          128 rows of d bytes                                          routed
//   K stages    kKStages x d / 64 blocks of a step's 128 keys (128 bytes)    all
//   V stages    kVStages x the same                                          all
//   K8 stages   kKStages x two halves of 64 rows of d bytes                  on_the_fly
//   barriers    mbarriers (8 bytes): K full, K empty [kKStages], V full,     all
//               V empty [kVStages], K loaded [kKStages], Q full, Q empty
//   K scales    floats [kKStages][2]: a K stage's two halves                 all
//   V scales    floats [kVStages][d], 16-byte aligned (bulk copies)          FP8 P V
//   scratch     one float per quantizer warp                                 all
//   Q scratch   one float per consumer warp (the consumers code Q8)          all
//   work tile   the tile that Q's pass brings (WorkTileSlot), 16-byte aligned all
//   next tile   the producer's next work tile (int64)                        all
//
// Every block of Q, Q8, K, V and K8 is a multiple of 1024 bytes, so each starts 1024-byte
// aligned. An INT8-routed half h of a K stage holds its 64 K8 rows (d bytes each) from byte
// h * kHalfBytes, where the first block's rows 64 h .. 64 h + 63 are, or, in the one-product
// instance at d = 64, from byte h * kK8HalfBytes, so that two K8 halves make one 128-row K8 block
// (at d = 128 both offsets are the same): kK8HalfOffset. on_the_fly keeps the K8 halves of stage s
// in K8 stage s (half h from byte h * kK8HalfBytes), apart from the FP16 rows they are coded from.
// An FP8 P V half holds its V8 box (d rows of 64 keys, 64-byte swizzle) from byte h * kHalfBytes
// of its V stage instead of V's rows, and the step's d V scales (one scale block of 128 keys) are
// in its V scales.
// Each K and V stage has a full and an empty barrier, and Q has its pair (StagePipeline), which
// also orders the work tile slot. The
// `loaded` barriers (the copy landed, the quantizers may read it) and the scratch serve
// on_the_fly alone, the K scales and the Q scratch tilemix alone, but every instance lays them
// out.
#include <cstdint>

#include "kernels/common/mma.cuh"
#include "kernels/common/pipeline.cuh"
#include "kernels/prefill/launch.hpp"
#include "kernels/prefill/tile_scheduler.cuh"

namespace tilemix::gpu {

template <class Cfg, ScorePaths kPaths, bool kUniformSteps, bool kFp8Pv>
struct SharedStorageWs {
  static constexpr bool kRouted = kPaths != ScorePaths::fp16;
  static constexpr bool kOnTheFly = kPaths == ScorePaths::routed_on_the_fly;
  static constexpr int kChannelBlocks = Cfg::kHeadDim / 64;
  static constexpr int kQBlockBytes = 128 * Cfg::kBlockM;
  static constexpr int kQ8Bytes = Cfg::kHeadDim * Cfg::kBlockM;
  static constexpr int kHalfBytes = 128 * Cfg::kRouteTileN;  // one routing tile's rows of a block
  static constexpr int kBlockBytes = 128 * Cfg::kBlockN;     // a step's rows of a block
  static constexpr int kStageBytes = kChannelBlocks * kBlockBytes;
  static constexpr int kK8HalfBytes = Cfg::kHeadDim * Cfg::kRouteTileN;  // one routing tile of K8
  static constexpr int kK8StageBytes = 2 * kK8HalfBytes;
  static constexpr int kK8HalfOffset = kUniformSteps || kOnTheFly ? kK8HalfBytes : kHalfBytes;
  static constexpr int kVScaleBytes = 4 * Cfg::kHeadDim;  // one step's

  static constexpr int kQ = 0;
  static constexpr int kQ8 = kQ + kChannelBlocks * kQBlockBytes;
  static constexpr int kFirstK = kQ8 + (kRouted ? kQ8Bytes : 0);
  static constexpr int kFirstV = kFirstK + Cfg::kKStages * kStageBytes;
  static constexpr int kFirstK8 = kFirstV + Cfg::kVStages * kStageBytes;
  static constexpr int kBarriers = kFirstK8 + (kOnTheFly ? Cfg::kKStages * kK8StageBytes : 0);
  static constexpr int kKFull = 0, kKEmpty = kKFull + Cfg::kKStages;  // indices among the barriers
  static constexpr int kVFull = kKEmpty + Cfg::kKStages, kVEmpty = kVFull + Cfg::kVStages;
  static constexpr int kKLoaded = kVEmpty + Cfg::kVStages;
  static constexpr int kQFull = kKLoaded + Cfg::kKStages, kQEmpty = kQFull + 1;
  static constexpr int kBarrierCount = kQEmpty + 1;
  static constexpr int kKScales = kBarriers + 8 * kBarrierCount;
  static constexpr int kKScalesEnd = kKScales + 4 * 2 * Cfg::kKStages;
  static constexpr int kVScales = (kKScalesEnd + 15) / 16 * 16;
  static constexpr int kScratch = kFp8Pv ? kVScales + Cfg::kVStages * kVScaleBytes : kKScalesEnd;
  static constexpr int kQScratch = kScratch + 4 * Cfg::kQuantizerWarps;
  static constexpr int kWorkTile = (kQScratch + 4 * Cfg::kWarps + 15) / 16 * 16;
  static constexpr int kNextTile = (kWorkTile + static_cast<int>(sizeof(WorkTileSlot)) + 7) / 8 * 8;
  static constexpr int kBytes = kNextTile + 8;
  static constexpr int kAllocBytes = kBytes + 1024;  // the base is aligned at run time
  static_assert(Cfg::kHeadDim == 64 || Cfg::kHeadDim == 128, "Q8 and K8 rows are one 64- or 128-byte swizzled row");
  static_assert(kQBlockBytes % 1024 == 0 && kQ8Bytes % 1024 == 0 && kBlockBytes % 1024 == 0 &&
                    kK8StageBytes % 1024 == 0,
                "blocks keep the 1024-byte alignment");
  static_assert(Cfg::kBlockN == 2 * Cfg::kRouteTileN, "a step is two routing tiles");
  static_assert(kAllocBytes <= 227 * 1024, "a CTA may use 227 KB of shared memory");

  __device__ __forceinline__ static char* align(char* raw) {
    const uint32_t misalign = smem_address(raw) & 1023u;
    return raw + ((1024u - misalign) & 1023u);
  }

  __device__ __forceinline__ static int k(int stage) { return kFirstK + stage * kStageBytes; }
  // Where stage `stage`'s K8 rows are: in the K stage (quantize_once's TMA copies) or in its own
  // K8 stage (on_the_fly's codes); half h's from kK8HalfOffset * h on.
  __device__ __forceinline__ static int k8(int stage) {
    return kOnTheFly ? kFirstK8 + stage * kK8StageBytes : k(stage);
  }
  __device__ __forceinline__ static int v(int stage) { return kFirstV + stage * kStageBytes; }
  __device__ __forceinline__ static int v_scales(int stage) { return kVScales + stage * kVScaleBytes; }
  __device__ __forceinline__ static float* k_scale(char* smem, int stage, int half) {
    return reinterpret_cast<float*>(smem + kKScales) + 2 * stage + half;
  }
  __device__ __forceinline__ static float* scratch(char* smem) { return reinterpret_cast<float*>(smem + kScratch); }
  __device__ __forceinline__ static float* q_scratch(char* smem) { return reinterpret_cast<float*>(smem + kQScratch); }
  __device__ __forceinline__ static WorkTileSlot* work_tile(char* smem) {
    return reinterpret_cast<WorkTileSlot*>(smem + kWorkTile);
  }
  __device__ __forceinline__ static volatile int64_t* next_tile(char* smem) {
    return reinterpret_cast<volatile int64_t*>(smem + kNextTile);
  }

  // The rings over the barriers, each at its first pass. on_the_fly's copies of K complete
  // `loaded`, and the quantizers `full`.
  struct KBarriers {
    static constexpr int kFull = kKFull, kEmpty = kKEmpty, kLoaded = kKLoaded;
    static constexpr bool kTransformed = kOnTheFly;
  };
  struct VBarriers {
    static constexpr int kFull = kVFull, kEmpty = kVEmpty;
    static constexpr bool kTransformed = false;
  };
  struct QBarriers {
    static constexpr int kFull = kQFull, kEmpty = kQEmpty;
    static constexpr bool kTransformed = false;
  };
  using KPipeline = StagePipeline<Cfg::kKStages, KBarriers>;
  using VPipeline = StagePipeline<Cfg::kVStages, VBarriers>;
  using QPipeline = StagePipeline<1, QBarriers>;
  __device__ __forceinline__ static KPipeline k_pipeline(char* smem) { return KPipeline(barriers(smem)); }
  __device__ __forceinline__ static VPipeline v_pipeline(char* smem) { return VPipeline(barriers(smem)); }
  __device__ __forceinline__ static QPipeline q_pipeline(char* smem) { return QPipeline(barriers(smem)); }

  // Every barrier, by one thread before the roles start: K's `full` completes with k_full_arrivals
  // arrivals, V's and Q's with the producer's one; K's and V's `empty` with stage_releases, Q's
  // with q_releases (the readers of Q and of the work tile slot); `loaded` with the producer's one.
  __device__ __forceinline__ static void init_barriers(char* smem, unsigned k_full_arrivals, unsigned stage_releases,
                                                       unsigned q_releases) {
    for (int s = 0; s < Cfg::kKStages; ++s) {
      mbarrier_init(barriers(smem) + (kKFull + s), k_full_arrivals);
      mbarrier_init(barriers(smem) + (kKEmpty + s), stage_releases);
      mbarrier_init(barriers(smem) + (kKLoaded + s), 1);
    }
    for (int s = 0; s < Cfg::kVStages; ++s) {
      mbarrier_init(barriers(smem) + (kVFull + s), 1);
      mbarrier_init(barriers(smem) + (kVEmpty + s), stage_releases);
    }
    mbarrier_init(barriers(smem) + kQFull, 1);
    mbarrier_init(barriers(smem) + kQEmpty, q_releases);
    fence_barrier_init();
  }

 private:
  __device__ __forceinline__ static uint64_t* barriers(char* smem) {
    return reinterpret_cast<uint64_t*>(smem + kBarriers);
  }
};

}  // namespace tilemix::gpu
