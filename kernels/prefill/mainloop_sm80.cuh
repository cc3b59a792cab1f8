#pragma once
// The K/V streaming loop of the prefill kernels for sm_80 and later: cp.async two-stage K/V
// pipeline, ldmatrix fragments, mma.sync for both score paths and for P V. Query tile and online
// state stay on chip; key tiles 0 .. key_tiles-1 run in ascending order, as the emulator walks
// them. The route of each key tile is one bit of the CTA's word, a uniform branch per tile: the
// FP16 path and the INT8 path share everything else (mask, softmax, P V).
//
// It serves d = 64 and fp16 P V accumulation (every score path); d = 128 with fp32 accumulation
// runs on the wgmma mainloop (mainloop_sm90.cuh). dispatch.cu makes the choice.
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/common/copy.cuh"
#include "kernels/common/tile_routes.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/prefill/accumulator.cuh"
#include "kernels/prefill/launch.hpp"
#include "kernels/prefill/mask.cuh"
#include "kernels/prefill/onchip_quant.cuh"
#include "kernels/prefill/params.cuh"
#include "kernels/prefill/smem_layout.cuh"
#include "kernels/prefill/softmax.cuh"
#include "kernels/prefill/tile_scheduler.cuh"

namespace tilemix::gpu {

template <class Cfg, ScorePaths kPaths>
struct MainloopSm80 {
  static constexpr bool kRouted = kPaths != ScorePaths::fp16;
  static constexpr bool kOnTheFly = kPaths == ScorePaths::routed_on_the_fly;
  static constexpr const char* kLaunchName = "launch of prefill_kernel (sm_80 mainloop)";
  using Smem = PrefillSmem<Cfg, kRouted>;
  using Softmax = OnlineSoftmax<Cfg::kRowSlices, Cfg::kKeyFrags>;
  using Scores = float[Cfg::kRowSlices][Cfg::kKeyFrags][4];

  // ldmatrix row/chunk of this lane for an A operand (16 rows x 32 bytes of K per k-step):
  // matrices 0..3 = (rows 0-7, bytes 0-15), (rows 8-15, 0-15), (rows 0-7, 16-31), (rows 8-15, 16-31).
  __device__ __forceinline__ static int a_row(int lane) { return lane & 15; }
  __device__ __forceinline__ static int a_chunk(int lane) { return lane >> 4; }
  // ... for B fragments of two n8 tiles stored as rows (K and K8: one row per key):
  // matrices = (n 0-7, bytes 0-15), (n 0-7, 16-31), (n 8-15, 0-15), (n 8-15, 16-31).
  __device__ __forceinline__ static int b_row(int lane) { return (lane & 7) | ((lane >> 4) << 3); }
  __device__ __forceinline__ static int b_chunk(int lane) { return (lane >> 3) & 1; }
  // ... for V^T fragments (ldmatrix.trans of V rows = keys): matrices = (keys 0-7, channels
  // 0-7), (keys 8-15, 0-7), (keys 0-7, 8-15), (keys 8-15, 8-15).
  __device__ __forceinline__ static int vt_row(int lane) { return lane & 15; }
  __device__ __forceinline__ static int vt_chunk(int lane) { return lane >> 4; }

  // FP16 path: s = fp32(Q K^T) * scale_log2. q_lane / k_lane: this lane's ldmatrix addresses of
  // the first k-step (row slice 0, key fragments 0-1).
  __device__ __forceinline__ static void fp16_scores(Scores& s, uint32_t q_lane, uint32_t k_lane, float scale_log2) {
    using QTile = typename Smem::QTile;
    using KTile = typename Smem::KTile;
    float acc[Cfg::kRowSlices][Cfg::kKeyFrags][4];
#pragma unroll
    for (int mi = 0; mi < Cfg::kRowSlices; ++mi)
#pragma unroll
      for (int ni = 0; ni < Cfg::kKeyFrags; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < Cfg::kHeadDim / 16; ++kk) {
      uint32_t a[Cfg::kRowSlices][4];
#pragma unroll
      for (int mi = 0; mi < Cfg::kRowSlices; ++mi) ldmatrix_x4(a[mi], QTile::step(q_lane, mi * 16, 2 * kk));
#pragma unroll
      for (int np = 0; np < Cfg::kKeyFrags / 2; ++np) {
        uint32_t b[4];
        ldmatrix_x4(b, KTile::step(k_lane, np * 16, 2 * kk));
#pragma unroll
        for (int mi = 0; mi < Cfg::kRowSlices; ++mi) {
          mma_m16n8k16_f32(acc[mi][2 * np], a[mi], b[0], b[1]);
          mma_m16n8k16_f32(acc[mi][2 * np + 1], a[mi], b[2], b[3]);
        }
      }
    }
#pragma unroll
    for (int mi = 0; mi < Cfg::kRowSlices; ++mi)
#pragma unroll
      for (int ni = 0; ni < Cfg::kKeyFrags; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mi][ni][e] = __fmul_rn(acc[mi][ni][e], scale_log2);
  }

  // INT8 path: C = Q8 K8^T exactly in int32, s = fp32(C) * ((scale_q * scale_log2) * scale_k).
  __device__ __forceinline__ static void int8_scores(Scores& s, uint32_t q8_lane, uint32_t k8_lane, float q_factor,
                                                     float k_scale) {
    using Q8Tile = typename Smem::Q8Tile;
    using K8Tile = typename Smem::K8Tile;
    int acc[Cfg::kRowSlices][Cfg::kKeyFrags][4];
#pragma unroll
    for (int mi = 0; mi < Cfg::kRowSlices; ++mi)
#pragma unroll
      for (int ni = 0; ni < Cfg::kKeyFrags; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0;
#pragma unroll
    for (int kk = 0; kk < Cfg::kHeadDim / 32; ++kk) {
      uint32_t a[Cfg::kRowSlices][4];
#pragma unroll
      for (int mi = 0; mi < Cfg::kRowSlices; ++mi) ldmatrix_x4(a[mi], Q8Tile::step(q8_lane, mi * 16, 2 * kk));
#pragma unroll
      for (int np = 0; np < Cfg::kKeyFrags / 2; ++np) {
        uint32_t b[4];
        ldmatrix_x4(b, K8Tile::step(k8_lane, np * 16, 2 * kk));
#pragma unroll
        for (int mi = 0; mi < Cfg::kRowSlices; ++mi) {
          mma_m16n8k32_s32(acc[mi][2 * np], a[mi], b[0], b[1]);
          mma_m16n8k32_s32(acc[mi][2 * np + 1], a[mi], b[2], b[3]);
        }
      }
    }
    const float factor = __fmul_rn(q_factor, k_scale);
#pragma unroll
    for (int mi = 0; mi < Cfg::kRowSlices; ++mi)
#pragma unroll
      for (int ni = 0; ni < Cfg::kKeyFrags; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mi][ni][e] = __fmul_rn(int8_dot_to_float(acc[mi][ni][e]), factor);
  }

  // O += fp16(P) V; v_lane: this lane's ldmatrix.trans address of keys 0-15, channels 0-15. The C
  // fragments of two adjacent n8 score tiles are, packed to f16x2, the A fragment of one k16 step
  // of P V: no data moves between threads.
  template <class Acc>
  __device__ __forceinline__ static void pv(Acc& o, const Scores& p, uint32_t v_lane) {
    using VTile = typename Smem::VTile;
#pragma unroll
    for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk) {
      uint32_t a[Cfg::kRowSlices][4];
#pragma unroll
      for (int mi = 0; mi < Cfg::kRowSlices; ++mi) {
        a[mi][0] = pack_half2(p[mi][2 * kk][0], p[mi][2 * kk][1]);
        a[mi][1] = pack_half2(p[mi][2 * kk][2], p[mi][2 * kk][3]);
        a[mi][2] = pack_half2(p[mi][2 * kk + 1][0], p[mi][2 * kk + 1][1]);
        a[mi][3] = pack_half2(p[mi][2 * kk + 1][2], p[mi][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < Cfg::kDimFrags / 2; ++dp) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, VTile::step(v_lane, kk * 16, 2 * dp));
#pragma unroll
        for (int mi = 0; mi < Cfg::kRowSlices; ++mi) {
          o.mma(mi, 2 * dp, a[mi], b[0], b[1]);
          o.mma(mi, 2 * dp + 1, a[mi], b[2], b[3]);
        }
      }
    }
  }

  template <class Acc>
  __device__ __forceinline__ static void run(const KernelParams& p, const BlockInfo& blk, char* smem, Softmax& softmax,
                                             Acc& o) {
    constexpr int D = Cfg::kHeadDim;
    constexpr int kThreads = Cfg::kThreads;
    float* scratch = reinterpret_cast<float*>(smem + Smem::kScratch);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const uint32_t smem_base = smem_address(smem);
    // ldmatrix addresses of this lane at k-step 0; the loops step from them by constants.
    const int warp_row = warp * Cfg::kWarpRows + a_row(lane);
    const uint32_t q_lane = smem_base + Smem::kQ + Smem::QTile::offset(warp_row, a_chunk(lane));
    const uint32_t q8_lane = smem_base + Smem::kQ8 + Smem::Q8Tile::offset(warp_row, a_chunk(lane));
    const uint32_t k_lane = smem_base + Smem::k(0) + Smem::KTile::offset(b_row(lane), b_chunk(lane));
    const uint32_t k8_lane = smem_base + Smem::k(0) + Smem::K8Tile::offset(b_row(lane), b_chunk(lane));
    const uint32_t v_lane = smem_base + Smem::v(0) + Smem::VTile::offset(vt_row(lane), vt_chunk(lane));

    const int64_t q_first = blk.q_first<Cfg::kBlockM>(p, D), k_first = blk.k_first(p, D);

    // Routing word of (KV head, query tile), loaded once: key tile n is INT8 when bit n / g is
    // set. Tiles are issued in ascending order, so TileRoutes reads the bits without dividing.
    TileRouting routing;
    routing.template load<kRouted>(p, blk);
    TileRoutes routes(routing.word, routing.group, 0);

    // Issues the copies of key tile n into `stage` as two groups (K or K8, then V), so that the
    // scores can start before V has landed. Inside the loop the copy addresses are derived from a
    // fresh read of the thread index: recomputing them is cheaper than keeping them live next to
    // the accumulators. The route and K scale of the tile in flight wait in
    // next_int8 / next_k_scale for the iteration that computes it.
    bool next_int8 = false;
    float next_k_scale = 0.0f;
    const auto issue_key_tile = [&](int n, int stage, int thread) {
      const int64_t first = k_first + static_cast<int64_t>(n) * Cfg::kBlockN * p.hk * D;
      const int valid = min(Cfg::kBlockN, blk.lk - n * Cfg::kBlockN);
      next_int8 = kRouted && routes.next();
      if (kPaths == ScorePaths::routed_quantize_once && next_int8) {
        load_tile_async<typename Smem::K8Tile, kThreads>(smem_base + Smem::k(stage),
                                                          reinterpret_cast<const char*>(p.k8 + first), p.k8_row_bytes,
                                                          valid, thread);
        next_k_scale = p.k_scale[(p.k_block_offset[blk.b] + n) * p.hk + blk.kv_head];
      } else {
        load_tile_async<typename Smem::KTile, kThreads>(smem_base + Smem::k(stage),
                                                         reinterpret_cast<const char*>(p.k + first), p.kv_row_bytes,
                                                         valid, thread);
      }
      cp_async_commit();
      load_tile_async<typename Smem::VTile, kThreads>(smem_base + Smem::v(stage),
                                                       reinterpret_cast<const char*>(p.v + first), p.kv_row_bytes, valid,
                                                       thread);
      cp_async_commit();
    };

    // Prologue: Q (and Q8 for quantize_once) in one group, then key tile 0.
    load_tile_async<typename Smem::QTile, kThreads>(smem_base + Smem::kQ, reinterpret_cast<const char*>(p.q + q_first),
                                                     p.q_row_bytes, blk.rows, tid);
    if (kPaths == ScorePaths::routed_quantize_once && routing.any_int8) {
      load_tile_async<typename Smem::Q8Tile, kThreads>(
          smem_base + Smem::kQ8, reinterpret_cast<const char*>(p.q8 + q_first), p.q8_row_bytes, blk.rows, tid);
    }
    cp_async_commit();
    if (blk.key_tiles > 0) {
      issue_key_tile(0, 0, tid);
    } else {
      cp_async_commit();
      cp_async_commit();
    }

    // Per-CTA INT8 factor scale_q * scale_log2 (the query tile is one Q scale block).
    float q_factor = 0.0f;
    if (kRouted && routing.any_int8) {
      float q_scale;
      if constexpr (kOnTheFly) {
        cp_async_wait<2>();
        __syncthreads();
        q_scale = quantize_resident_tile<Cfg::kBlockM, D, kThreads, false>(smem + Smem::kQ, smem + Smem::kQ8,
                                                                          scratch, tid);
      } else {
        q_scale = p.q_scale[(p.q_block_offset[blk.b] + blk.m) * p.hq + blk.h];
      }
      q_factor = __fmul_rn(q_scale, p.scale_log2);
    }

    for (int n = 0; n < blk.key_tiles; ++n) {
      const int stage = n & 1;
      const bool int8_tile = next_int8;
      const float k_scale = next_k_scale;
      // K of tile n (and Q) landed; every warp is done with tile n - 1, so its stage is free.
      cp_async_wait<1>();
      __syncthreads();
      if (n + 1 < blk.key_tiles) {
        issue_key_tile(n + 1, stage ^ 1, fresh_thread_index());
      } else {
        cp_async_commit();
        cp_async_commit();
      }

      Scores s;
      if (kRouted && int8_tile) {
        float tile_k_scale = k_scale;
        if constexpr (kOnTheFly) {
          tile_k_scale = quantize_resident_tile<Cfg::kBlockN, D, kThreads, true>(smem + Smem::k(stage),
                                                                                 smem + Smem::k(stage), scratch, tid);
        }
        int8_scores(s, q8_lane, k8_lane + stage * Smem::kStageBytes, q_factor, tile_k_scale);
      } else {
        fp16_scores(s, q_lane, k_lane + stage * Smem::kStageBytes, p.scale_log2);
      }
      if (TileMask<Cfg>::needed(blk, n, p.causal)) {
        const int t = fresh_thread_index();  // rare path: recompute the row positions
        TileMask<Cfg>::apply(s, blk, n, p.causal, t >> 5, t & 31);
      }

      float alpha[Softmax::kRows];
      softmax.update(s, p.fp16_state, alpha);
      o.rescale(alpha);

      cp_async_wait<2>();  // V of tile n landed
      __syncthreads();
      pv(o, s, v_lane + stage * Smem::kStageBytes);
      if (p.fp16_state) o.round_to_half_state();
    }
  }
};

}  // namespace tilemix::gpu
