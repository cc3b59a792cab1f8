#pragma once
// The producer of the warp-specialized prefill kernel: one thread of the producer warpgroup issues
// every TMA copy of the CTA's work tiles, in the order the consumers read them. Per work tile, Q
// into its buffer once every reader released it (the consumers code Q8 from it; they and
// on_the_fly's quantizers read the work tile slot that comes with it); per step, into the next
// free K stage, per half K8 for an INT8-routed tile (quantize_once: half the bytes of K, its K
// scale beside it) or K; then into the next free V stage both halves of V, or with FP8 P V per
// half V8 or V and the step's V scales. The route bit decides the copy. on_the_fly copies K alone,
// onto the `loaded` barriers, for the quantizers (quantizer_ws.cuh).
#include <cstdint>

#include "kernels/common/pipeline.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/prefill/kernel_traits_ws.cuh"

namespace tilemix::gpu {

// The producer of one instance (Kernel: its KernelTraitsWs): run() takes the CTA's work tiles
// (PersistentTiles) and hands each to the other roles, copy_tile, copy_k and copy_v issue the
// copies.
template <class Kernel>
struct ProducerWs {
  static constexpr int D = Kernel::D;
  static constexpr int kHalfN = Kernel::kHalfN;
  using Cfg = typename Kernel::Cfg;
  using Storage = typename Kernel::Storage;

  __device__ __forceinline__ static void run(const KernelParamsWs& w, char* smem) {
    tma_prefetch_descriptor(&w.q);
    tma_prefetch_descriptor(&w.k);
    tma_prefetch_descriptor(&w.v);
    if constexpr (Kernel::kOnceCopies) tma_prefetch_descriptor(&w.k8);
    if constexpr (Kernel::kFp8Pv) tma_prefetch_descriptor(&w.v8);
    auto k_ring = Storage::k_pipeline(smem);
    auto v_ring = Storage::v_pipeline(smem);
    auto q_ring = Storage::q_pipeline(smem);
    // The CTA's next tile, in shared memory: the static order's before a tile's copies, a claimed
    // one once they are issued (the atomic's wait then lies under the consumers' last steps).
    // Whatever lives in a register across the copies makes ptxas spill up to 112 bytes of the
    // producer's 24 registers.
    volatile int64_t* next = Storage::next_tile(smem);
    for (int64_t t = w.tiles.first(); t < w.tiles.count(); t = *next) {
      if (!w.tiles.dynamic()) *next = t + gridDim.x;
      BlockInfo blk;
      TileRouting routing;
      if (w.tiles.template work_tile<Cfg::kBlockM, Cfg::kRouteTileN, Kernel::kRouted>(w.p, t, blk, routing)) {
        copy_tile(w, smem, blk, routing, k_ring, v_ring, q_ring);
      }
      if (w.tiles.dynamic()) *next = w.tiles.take();
    }
    // The end of the CTA's tiles, through the slot once its readers are done with the last tile.
    q_ring.acquire();
    Storage::work_tile(smem)->end = 1;
    q_ring.commit(0);
    w.tiles.finish();
  }

  // One work tile: the tile into the slot and Q, once the consumers are done with the previous
  // tile's Q and Q8 (and every reader with the slot), then each step's K and V.
  __device__ __forceinline__ static void copy_tile(const KernelParamsWs& w, char* smem, const BlockInfo& blk,
                                                   const TileRouting& routing,
                                                   typename Storage::KPipeline& k_ring,
                                                   typename Storage::VPipeline& v_ring,
                                                   typename Storage::QPipeline& q_ring) {
    const KernelParams& p = w.p;
    const uint32_t base = smem_address(smem);
    const int q_token0 = static_cast<int>(blk.q_token0<Cfg::kBlockM>(p));
    const int k_token0 = static_cast<int>(blk.k_token0(p));

    q_ring.acquire();
    // Stored before the commit, whose release publishes it with the copy.
    *Storage::work_tile(smem) = WorkTileSlot{blk, routing, 0};
    q_ring.commit(Storage::kChannelBlocks * Storage::kQBlockBytes);
#pragma unroll
    for (int c = 0; c < Storage::kChannelBlocks; ++c) {
      tma_load_3d(base + Storage::kQ + c * Storage::kQBlockBytes, &w.q, q_ring.landing(), 64 * c, blk.h, q_token0);
    }
    q_ring.advance();

    const int steps = Kernel::steps(blk);
    TileRoutes routes(routing.word, routing.group, 0);
    for (int n = 0; n < steps; ++n) {
      StepRoutes step;
      step.template next<Kernel::kRouted>(routes, blk, n);
      const int key = k_token0 + n * Cfg::kBlockN;
      copy_k(w, smem, blk, step, n, key, k_ring);
      k_ring.advance();
      copy_v(w, smem, blk, step, n, key, v_ring);
      v_ring.advance();
    }
  }

  // K: per half, K8 for an INT8-routed tile (its scale beside it) or K; no copy for a half past
  // the tile's keys (the mask sets its scores to -inf).
  __device__ __forceinline__ static void copy_k(const KernelParamsWs& w, char* smem, const BlockInfo& blk,
                                                const StepRoutes& step, int n, int key,
                                                const typename Storage::KPipeline& ring) {
    const KernelParams& p = w.p;
    const uint32_t base = smem_address(smem);
    constexpr bool kOnceCopies = Kernel::kOnceCopies;
    ring.acquire();
    const int halves = step.halves2 ? 2 : 1;
    unsigned bytes = 0;
    for (int h = 0; h < halves; ++h) {
      bytes += kOnceCopies && step.int8[h] ? Storage::kK8HalfBytes : Storage::kChannelBlocks * Storage::kHalfBytes;
      // The scale is stored before the commit, whose release publishes it with the copy.
      if (kOnceCopies && step.int8[h]) {
        *Storage::k_scale(smem, ring.stage(), h) =
            p.k_scale[(p.k_block_offset[blk.b] + 2 * n + h) * p.hk + blk.kv_head];
      }
    }
    ring.commit(bytes);
    for (int h = 0; h < halves; ++h) {
      const uint32_t stage = base + Storage::k(ring.stage());
      if (kOnceCopies && step.int8[h]) {
        tma_load_3d(stage + h * Storage::kK8HalfOffset, &w.k8, ring.landing(), 0, blk.kv_head, key + h * kHalfN);
      } else {
#pragma unroll
        for (int c = 0; c < Storage::kChannelBlocks; ++c) {
          tma_load_3d(stage + h * Storage::kHalfBytes + c * Storage::kBlockBytes, &w.k, ring.landing(), 64 * c,
                      blk.kv_head, key + h * kHalfN);
        }
      }
    }
  }

  // V: both halves (rows past the tensor read as zeros; the consumers zero the rows past the
  // sequence's keys), or with FP8 P V per existing half V8 (FP8 halves) or V (FP16 halves), none
  // past the tile, and the scales of the step's 128 keys once for an FP8 group (both of its
  // blocks hold them).
  __device__ __forceinline__ static void copy_v(const KernelParamsWs& w, char* smem, const BlockInfo& blk,
                                                const StepRoutes& step, int n, int key,
                                                const typename Storage::VPipeline& ring) {
    const KernelParams& p = w.p;
    const uint32_t base = smem_address(smem);
    ring.acquire();
    if constexpr (Kernel::kFp8Pv) {
      constexpr PvPaths kPv = Kernel::kPv;
      const int halves = step.halves2 ? 2 : 1;
      const int64_t v_block0 = p.k_block_offset[blk.b] + 2 * n;
      const unsigned group = step.template fp8_halves<kPv>();
      unsigned bytes = group ? Storage::kVScaleBytes : 0;
      for (int h = 0; h < halves; ++h) {
        bytes += step.template fp8<kPv>(h) ? D * kHalfN : Storage::kChannelBlocks * Storage::kHalfBytes;
      }
      ring.commit(bytes);
      if (group) {
        bulk_load(base + Storage::v_scales(ring.stage()), p.v_scale + (v_block0 * p.hk + blk.kv_head) * D,
                  Storage::kVScaleBytes, ring.landing());
      }
      for (int h = 0; h < halves; ++h) {
        const uint32_t half = base + Storage::v(ring.stage()) + h * Storage::kHalfBytes;
        if (step.template fp8<kPv>(h)) {
          tma_load_3d(half, &w.v8, ring.landing(), static_cast<int>((v_block0 + h) * kHalfN), 0, blk.kv_head);
        } else {
#pragma unroll
          for (int c = 0; c < Storage::kChannelBlocks; ++c) {
            tma_load_3d(half + c * Storage::kBlockBytes, &w.v, ring.landing(), 64 * c, blk.kv_head, key + h * kHalfN);
          }
        }
      }
    } else {
      ring.commit(Storage::kStageBytes);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int c = 0; c < Storage::kChannelBlocks; ++c) {
          tma_load_3d(base + Storage::v(ring.stage()) + c * Storage::kBlockBytes + h * Storage::kHalfBytes, &w.v,
                      ring.landing(), 64 * c, blk.kv_head, key + h * kHalfN);
        }
      }
    }
  }
};

}  // namespace tilemix::gpu
