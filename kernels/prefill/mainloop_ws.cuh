#pragma once
// The warp-specialized prefill mainloop (sm_90a, d = 128, prefill v3): the same walk, routes,
// score formulas, mask, online softmax and rounding points as MainloopSm90, with the copies taken
// off the consumers.
//   Producer warpgroup (one thread issues): per work tile, Q (and Q8 when some key tile is
//   INT8-routed) by TMA into their buffers once the consumers released them; per key tile, into
//   the next free stage of a ring, K8 for an INT8-routed tile (quantize_once: half the bytes of K)
//   or K, and V. The route bit decides the copy; the tile's K scale goes into the stage beside it.
//   Consumer warpgroups (64 query rows each): per key tile, wait for the stage, S = Q K^T or
//   Q8 K8^T (wgmma from shared memory), mask, softmax, O += P V, release the stage; the P V
//   product of a tile runs under the next tile's score product and softmax.
// Every stage has a full and an empty mbarrier (kernels/common/pipeline.cuh); Q has its own pair.
// No CTA barrier in the loop: the warpgroups meet only on the sequence's partial last key tile,
// whose V rows past the sequence end (another sequence's keys) are zeroed before P V, so that only
// the sequence's own values reach O even where they are not finite.
#include <cuda.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/copy.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/pipeline.cuh"
#include "kernels/common/tile_routes.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/prefill/accumulator.cuh"
#include "kernels/prefill/launch.hpp"
#include "kernels/prefill/mask.cuh"
#include "kernels/prefill/params.cuh"
#include "kernels/prefill/softmax.cuh"
#include "kernels/prefill/tile_scheduler.cuh"
#include "kernels/quant/int8_codes.cuh"

namespace tilemix::gpu {

// Parameters of the warp-specialized kernel: the common ones and the tensor maps of the TMA copies
// (Q, K, V as 64-channel boxes of 128 bytes; Q8, K8 as 128-channel boxes), built on the host.
struct KernelParamsWs {
  KernelParams p;
  CUtensorMap q, k, v, q8, k8;
  PersistentTiles tiles;
};

// [Q: two 64-channel blocks of 128 rows][Q8: 128 rows, routed only][stage s: K (or K8 in its first
// block) | V] x kStages | barriers | K scales [kStages]. Every block is 1024-byte aligned (the
// 128-byte swizzle's address bits).
template <class Cfg, bool kRouted>
struct PrefillSmemWs {
  static constexpr int kChannelBlocks = Cfg::kHeadDim / 64;
  static constexpr int kQBlockBytes = 128 * Cfg::kBlockM;
  static constexpr int kKBlockBytes = 128 * Cfg::kBlockN;
  static constexpr int kStages = Cfg::kStages;
  static constexpr int kQ = 0;
  static constexpr int kQ8 = kQ + kChannelBlocks * kQBlockBytes;
  static constexpr int kFirstStage = kQ8 + (kRouted ? kQBlockBytes : 0);
  static constexpr int kKBytes = kChannelBlocks * kKBlockBytes;
  static constexpr int kStageBytes = 2 * kKBytes;
  static constexpr int kBarriers = kFirstStage + kStages * kStageBytes;
  // full[s], empty[s], q_full, q_empty
  static constexpr int kBarrierCount = 2 * kStages + 2;
  static constexpr int kKScales = kBarriers + 8 * kBarrierCount;
  static constexpr int kBytes = kKScales + 4 * kStages;
  static constexpr int kAllocBytes = kBytes + 1024;  // the base is aligned at run time
  static_assert(Cfg::kHeadDim == 128, "Q8 and K8 rows are one 128-byte block");
  static_assert(kAllocBytes <= 227 * 1024, "a CTA may use 227 KB of shared memory");

  __device__ __forceinline__ static char* align(char* raw) {
    const uint32_t misalign = smem_address(raw) & 1023u;
    return raw + ((1024u - misalign) & 1023u);
  }
  __device__ __forceinline__ static int k(int stage) { return kFirstStage + stage * kStageBytes; }
  __device__ __forceinline__ static int v(int stage) { return k(stage) + kKBytes; }
  __device__ __forceinline__ static uint64_t* full(char* smem, int stage) {
    return reinterpret_cast<uint64_t*>(smem + kBarriers) + stage;
  }
  __device__ __forceinline__ static uint64_t* empty(char* smem, int stage) {
    return reinterpret_cast<uint64_t*>(smem + kBarriers) + kStages + stage;
  }
  __device__ __forceinline__ static uint64_t* q_full(char* smem) {
    return reinterpret_cast<uint64_t*>(smem + kBarriers) + 2 * kStages;
  }
  __device__ __forceinline__ static uint64_t* q_empty(char* smem) {
    return reinterpret_cast<uint64_t*>(smem + kBarriers) + 2 * kStages + 1;
  }
  __device__ __forceinline__ static float* k_scale(char* smem, int stage) {
    return reinterpret_cast<float*>(smem + kKScales) + stage;
  }
};

// Position in the ring of stages, shared by producer and consumers: pass `it` over the ring uses
// stage it % kStages with phase parity (it / kStages) & 1.
template <int kStages>
struct RingPosition {
  int stage = 0;
  unsigned parity = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      parity ^= 1u;
    }
  }
};

// The route word and group of a work tile (tilemix), and whether some of its key tiles are INT8.
struct TileRouting {
  uint64_t word = 0;
  int group = 1;
  bool any_int8 = false;

  template <bool kRouted>
  __device__ __forceinline__ void load(const KernelParams& p, const BlockInfo& blk) {
    if constexpr (kRouted) {
      word = p.words[static_cast<int64_t>(blk.kv_head) * p.total_query_tiles + p.tile_offset[blk.b] + blk.m];
      group = p.group[blk.b];
      any_int8 = any_int8_tile(word, group, 0, blk.key_tiles);
    }
  }
};

template <class Cfg, ScorePaths kPaths>
struct MainloopWs {
  static_assert(kPaths != ScorePaths::routed_on_the_fly, "on_the_fly runs on MainloopSm90");
  static constexpr bool kRouted = kPaths != ScorePaths::fp16;
  static constexpr const char* kLaunchName = "launch of prefill_kernel_ws (warp-specialized mainloop)";
  using Smem = PrefillSmemWs<Cfg, kRouted>;
  using Softmax = OnlineSoftmax<Cfg::kRowSlices, Cfg::kKeyFrags>;
  using Scores = float[Cfg::kRowSlices][Cfg::kKeyFrags][4];
  using Ring = RingPosition<Cfg::kStages>;
  static constexpr int D = Cfg::kHeadDim;

  // Barrier arrivals: the producer's one arrive.expect_tx per fill; one arrive per consumer warp
  // per release.
  __device__ __forceinline__ static void init_barriers(char* smem) {
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbarrier_init(Smem::full(smem, s), 1);
      mbarrier_init(Smem::empty(smem, s), Cfg::kWarps);
    }
    mbarrier_init(Smem::q_full(smem), 1);
    mbarrier_init(Smem::q_empty(smem), Cfg::kWarps);
    fence_barrier_init();
  }

  // The producer's single issuing thread: every work tile of this CTA, in the consumers' order.
  __device__ __forceinline__ static void produce(const KernelParamsWs& w, char* smem) {
    const KernelParams& p = w.p;
    const uint32_t base = smem_address(smem);
    tma_prefetch_descriptor(&w.q);
    tma_prefetch_descriptor(&w.k);
    tma_prefetch_descriptor(&w.v);
    if constexpr (kRouted) {
      tma_prefetch_descriptor(&w.q8);
      tma_prefetch_descriptor(&w.k8);
    }
    Ring ring;
    unsigned q_parity = 0;
    for (int64_t t = blockIdx.x; t < w.tiles.count(); t += gridDim.x) {
      BlockInfo blk;
      if (!w.tiles.template block<Cfg::kBlockM, Cfg::kBlockN>(p, t, blk)) continue;
      TileRouting routing;
      routing.template load<kRouted>(p, blk);
      const int q_token0 = static_cast<int>(blk.q_token0<Cfg::kBlockM>(p));
      const int k_token0 = static_cast<int>(blk.k_token0(p));

      // Q (and Q8) once the consumers are done with the previous tile's.
      mbarrier_wait(Smem::q_empty(smem), q_parity ^ 1u);
      const bool q8 = kPaths == ScorePaths::routed_quantize_once && routing.any_int8;
      mbarrier_arrive_expect_tx(Smem::q_full(smem), Smem::kChannelBlocks * Smem::kQBlockBytes +
                                                        (q8 ? Smem::kQBlockBytes : 0));
#pragma unroll
      for (int c = 0; c < Smem::kChannelBlocks; ++c) {
        tma_load_3d(base + Smem::kQ + c * Smem::kQBlockBytes, &w.q, Smem::q_full(smem), 64 * c, blk.h, q_token0);
      }
      if constexpr (kRouted) {
        if (q8) tma_load_3d(base + Smem::kQ8, &w.q8, Smem::q_full(smem), 0, blk.h, q_token0);
      }
      q_parity ^= 1u;

      TileRoutes routes(routing.word, routing.group, 0);
      for (int n = 0; n < blk.key_tiles; ++n) {
        mbarrier_wait(Smem::empty(smem, ring.stage), ring.parity ^ 1u);
        uint64_t* full = Smem::full(smem, ring.stage);
        const int key = k_token0 + n * Cfg::kBlockN;
        const bool int8_tile = kRouted && routes.next();
        if (kPaths == ScorePaths::routed_quantize_once && int8_tile) {
          *Smem::k_scale(smem, ring.stage) = p.k_scale[(p.k_block_offset[blk.b] + n) * p.hk + blk.kv_head];
          mbarrier_arrive_expect_tx(full, Smem::kKBlockBytes + Smem::kKBytes);
          tma_load_3d(base + Smem::k(ring.stage), &w.k8, full, 0, blk.kv_head, key);
        } else {
          mbarrier_arrive_expect_tx(full, 2 * Smem::kKBytes);
#pragma unroll
          for (int c = 0; c < Smem::kChannelBlocks; ++c) {
            tma_load_3d(base + Smem::k(ring.stage) + c * Smem::kKBlockBytes, &w.k, full, 64 * c, blk.kv_head, key);
          }
        }
#pragma unroll
        for (int c = 0; c < Smem::kChannelBlocks; ++c) {
          tma_load_3d(base + Smem::v(ring.stage) + c * Smem::kKBlockBytes, &w.v, full, 64 * c, blk.kv_head, key);
        }
        ring.advance();
      }
    }
  }

  // A consumer warpgroup (index `wg` 0 or 1 of the consumers; `tid` 0..255 over both): every work
  // tile of this CTA, its rows 64 wg .. 64 wg + 63 of each.
  template <class Epilogue>
  __device__ __forceinline__ static void consume(const KernelParamsWs& w, char* smem, int tid) {
    const KernelParams& p = w.p;
    const int warp = tid >> 5, lane = tid & 31;
    const int wg_row0 = (warp / 4) * 64;
    const uint32_t base = smem_address(smem);
    const uint64_t q_desc = sw128_desc(base + Smem::kQ + wg_row0 * 128);
    const uint64_t q8_desc = sw128_desc(base + Smem::kQ8 + wg_row0 * 128);
    Ring ring;
    unsigned q_parity = 0;
    for (int64_t t = blockIdx.x; t < w.tiles.count(); t += gridDim.x) {
      BlockInfo blk;
      if (!w.tiles.template block<Cfg::kBlockM, Cfg::kBlockN>(p, t, blk)) continue;
      TileRouting routing;
      routing.template load<kRouted>(p, blk);
      float q_factor = 0.0f;  // scale_q * scale_log2 (the query tile is one Q scale block)
      if (kRouted && routing.any_int8) {
        q_factor = __fmul_rn(p.q_scale[(p.q_block_offset[blk.b] + blk.m) * p.hq + blk.h], p.scale_log2);
      }
      Softmax softmax;
      softmax.init();
      OutputAccumulator<Cfg, false> o;
      o.zero();
      float (&acc_o)[4 * Cfg::kDimFrags] = reinterpret_cast<float(&)[4 * Cfg::kDimFrags]>(o.c);

      mbarrier_wait(Smem::q_full(smem), q_parity);
      q_parity ^= 1u;
      TileRoutes routes(routing.word, routing.group, 0);
      const int last = blk.key_tiles - 1;
      const int partial_from = blk.lk - last * Cfg::kBlockN;  // valid keys of the last tile

      // Key tile n's scores: issued (S = Q K^T or Q8 K8^T), then finished once they landed
      // (fp32 scores in the log2 domain, masked), then the softmax turns them into P.
      bool int8_tile = false;
      float k_scale = 0.0f;
      // Both score products accumulate into the same 32 integer registers (s32 or the f32 bits), so
      // that one register set is in flight however the tile is routed.
      const auto issue_scores = [&](const Ring& at, uint32_t (&acc)[32]) {
        mbarrier_wait(Smem::full(smem, at.stage), at.parity);
        int8_tile = kRouted && routes.next();
        const uint64_t k_desc = sw128_desc(base + Smem::k(at.stage));
        if (kRouted && int8_tile) {
          k_scale = *Smem::k_scale(smem, at.stage);
          wgmma_scores_s8_d128(acc, q8_desc, k_desc);
        } else {
          wgmma_scores_f16_d128(acc, q_desc, Smem::kQBlockBytes, k_desc, Smem::kKBlockBytes);
        }
      };
      const auto finish_scores = [&](int n, const Ring& at, uint32_t (&acc)[32], Scores& s) {
        float (&x)[32] = reinterpret_cast<float(&)[32]>(s);
        wgmma_fence_operands(acc);
        if (kRouted && int8_tile) {
          // s = fp32(C) * ((scale_q * scale_log2) * scale_k), as MainloopSm90.
          const float factor = __fmul_rn(q_factor, k_scale);
#pragma unroll
          for (int i = 0; i < 32; ++i) x[i] = __fmul_rn(int8_dot_to_float(static_cast<int>(acc[i])), factor);
        } else {
#pragma unroll
          for (int i = 0; i < 32; ++i) x[i] = __fmul_rn(__uint_as_float(acc[i]), p.scale_log2);
        }
        // The tile's last score product has read Q: the producer may bring the next tile's.
        if (n == last && lane == 0) mbarrier_arrive(Smem::q_empty(smem));
        if (TileMask<Cfg>::needed(blk, n, p.causal)) TileMask<Cfg>::apply(s, blk, n, p.causal, warp, lane);
        if (n == last && partial_from < Cfg::kBlockN) zero_v_rows(smem, at.stage, partial_from, tid);
      };
      // P of a tile as the A fragments of P V: the k16 step kk covers keys 16 kk .. 16 kk + 15,
      // score fragments 2 kk and 2 kk + 1.
      uint32_t a[Cfg::kBlockN / 16][4];
      const auto pack_p = [&](const Scores& s) {
#pragma unroll
        for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk) {
          a[kk][0] = pack_half2(s[0][2 * kk][0], s[0][2 * kk][1]);
          a[kk][1] = pack_half2(s[0][2 * kk][2], s[0][2 * kk][3]);
          a[kk][2] = pack_half2(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
          a[kk][3] = pack_half2(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
        }
      };
      const auto issue_pv = [&](const Ring& at) {
        wgmma_pv_k64(acc_o, a, sw128_desc_mn(base + Smem::v(at.stage), Smem::kKBlockBytes));
      };
      // P V of a tile done: its stage goes back to the producer.
      const auto finish_pv = [&](const Ring& at) {
        wgmma_fence_operands(acc_o);
        if (lane == 0) mbarrier_arrive(Smem::empty(smem, at.stage));
        if (p.fp16_state) o.round_to_half_state();
      };

      // Tile n's P V runs under tile n + 1's score product and softmax: the steps per element
      // (O = O * alpha_n+1 + P_n+1 V_n+1 after O += P_n V_n) are those of the sequential loop.
      if (blk.key_tiles > 0) {
        Ring prev = ring;
        {
          uint32_t acc[32];
          Scores s;
          issue_scores(ring, acc);
          wgmma_wait_all();
          finish_scores(0, ring, acc, s);
          float alpha[Softmax::kRows];
          softmax.update(s, p.fp16_state, alpha);  // O is zero: alpha is not needed
          pack_p(s);
        }
        ring.advance();
        for (int n = 1; n < blk.key_tiles; ++n) {
          uint32_t acc[32];  // the tile's s32 or f32 scores, in flight until the wait
          Scores s;
          issue_scores(ring, acc);
          issue_pv(prev);
          wgmma_wait<1>();  // the scores landed; P V may still run
          finish_scores(n, ring, acc, s);
          float alpha[Softmax::kRows];
          softmax.update(s, p.fp16_state, alpha);
          wgmma_wait_all();
          finish_pv(prev);
          if (Softmax::any_moved(alpha)) o.rescale(alpha);
          pack_p(s);
          prev = ring;
          ring.advance();
        }
        issue_pv(prev);
        wgmma_wait_all();
        finish_pv(prev);
      } else if (lane == 0) {
        mbarrier_arrive(Smem::q_empty(smem));
      }
      Epilogue::store_direct(p, blk, softmax, o, warp, lane);
    }
  }

  // V rows [valid, kBlockN) of a stage to zero: past the sequence end the tile holds another
  // sequence's keys (or TMA's zeros past the tensor), which P = 0 must not multiply into NaN. Every
  // consumer thread has waited for the stage to land; both warpgroups read the whole tile, so they
  // meet once the zeros are written.
  __device__ __forceinline__ static void zero_v_rows(char* smem, int stage, int valid, int tid) {
    constexpr int kChunksPerRow = 8;  // 16-byte chunks of a 128-byte row
    const int chunks = (Cfg::kBlockN - valid) * kChunksPerRow * Smem::kChannelBlocks;
    char* v = smem + Smem::v(stage);
    for (int i = tid; i < chunks; i += Cfg::kThreads) {
      const int block = i / ((Cfg::kBlockN - valid) * kChunksPerRow);
      const int in_block = i % ((Cfg::kBlockN - valid) * kChunksPerRow);
      const int row = valid + in_block / kChunksPerRow;
      *reinterpret_cast<uint4*>(v + block * Smem::kKBlockBytes + row * 128 + (in_block % kChunksPerRow) * 16) =
          make_uint4(0u, 0u, 0u, 0u);
    }
    fence_proxy_async_shared();  // the zeros reach wgmma's operand reads
    named_barrier_sync(1, Cfg::kThreads);
  }
};

}  // namespace tilemix::gpu
