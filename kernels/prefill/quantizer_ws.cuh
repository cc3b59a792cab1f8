#pragma once
// on_the_fly on the warp-specialized prefill kernel: the producer warpgroup's quantizer warps
// (warps 1-3) code each INT8-routed half's K8 from the FP16 K that TMA brought into shared memory,
// off the consumers' path, with the blocks and rounding of quantize_keys (absmax over the block's
// rows in the sequence, int8_block_scale, Int8Encoder), so that both modes give identical codes
// and scales. (Q8 the consumers code in both modes: consumer_ws.cuh.)
#include <cstdint>

#include "kernels/common/pipeline.cuh"
#include "kernels/common/tile_routes.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/prefill/kernel_traits_ws.cuh"
#include "kernels/prefill/onchip_quant.cuh"

namespace tilemix::gpu {

// The quantizer warps (`qtid` 0 .. kThreads - 1): for every work tile the producer hands the
// CTA, per step each INT8-routed half's K8 and K scale once the K stage landed; every
// quantizer warp then commits (an arrive on `full`), which hands the codes and scales to the
// consumers.
template <class Kernel>
struct QuantizerWs {
  static_assert(Kernel::kOnTheFly, "quantize_once copies its codes");
  using Cfg = typename Kernel::Cfg;
  using Storage = typename Kernel::Storage;
  static constexpr int D = Kernel::D;
  static constexpr int kHalfN = Kernel::kHalfN;
  static constexpr int kThreads = 32 * Cfg::kQuantizerWarps;
  static constexpr unsigned kBarrier = static_cast<unsigned>(NamedBarrierWs::quantizers);

  __device__ __forceinline__ static void run(const KernelParamsWs& w, char* smem, int qtid) {
    const int lane = qtid & 31;
    float* scratch = Storage::scratch(smem);
    auto k_ring = Storage::k_pipeline(smem);
    auto q_ring = Storage::q_pipeline(smem);
    // The producer's tiles, read from the slot once Q's pass completed; each quantizer thread then
    // releases Q's pass (its slot) at once: it reads no Q.
    for (;; q_ring.advance()) {
      q_ring.wait();
      const WorkTileSlot* slot = Storage::work_tile(smem);
      if (slot->end) break;
      const BlockInfo blk = slot->blk;
      const TileRouting routing = slot->routing;
      q_ring.release();
      TileRoutes routes(routing.word, routing.group, 0);
      for (int n = 0; n < Kernel::steps(blk); ++n) {
        StepRoutes step;
        step.template next<true>(routes, blk, n);
        k_ring.wait_landed();
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (!step.int8[h]) continue;
          const int key0 = (2 * n + h) * kHalfN;  // the half's first key in the sequence
          const float scale = quantize_resident_rows<kHalfN, D, kThreads>(
              smem + Storage::k(k_ring.stage()) + h * Storage::kHalfBytes, Storage::kBlockBytes,
              smem + Storage::k8(k_ring.stage()) + h * Storage::kK8HalfOffset, min(kHalfN, blk.lk - key0), qtid,
              scratch, kBarrier);
          if (qtid == 0) *Storage::k_scale(smem, k_ring.stage(), h) = scale;
        }
        k_ring.commit_by_warp(lane);
        k_ring.advance();
      }
    }
  }
};

}  // namespace tilemix::gpu
