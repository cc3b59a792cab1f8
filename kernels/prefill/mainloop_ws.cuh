#pragma once
// The warp-specialized prefill mainloop (sm_90a, d = 64 and 128, prefill v3): the same routes, score
// products, mask and scale factors as MainloopSm90, in steps of two routing tiles (128 keys: the
// online softmax updates once per step), the scale folded into the softmax's exponent (one FMA
// per score, OnlineSoftmax::update_fused), with the copies taken off the consumers. The emulator
// follows with softmax_tiles = 2 and fused_score_scale (gpu::prefill_step_numerics).
//   Producer warpgroup (one thread issues): per work tile, Q (and Q8 when some key tile is
//   INT8-routed) by TMA into their buffers once the consumers released them; per step, into the
//   next free K stage, per half K8 for an INT8-routed tile (quantize_once: half the bytes of K) or
//   K, the half's K scale beside it; then both halves of V into the next free V stage. The route
//   bit decides the copy. on_the_fly copies Q and K alone, and the warpgroup's other three warps
//   (the quantizers) code Q8 and each INT8-routed half's K8 from them (quantize_ws.cuh) before
//   they hand the stage to the consumers, so no consumer waits for a quantization of its own.
//   Consumer warpgroups (64 query rows each): per step, wait for the K stage, S = Q K^T or
//   Q8 K8^T per half (wgmma from shared memory), release the K stage once the scores landed, mask,
//   softmax, O += P V, release the V stage; a step's P V runs under the next step's score product
//   and softmax. With FP8 P V (kPv, fp8_pv.cuh) the producer copies V8 for the FP8 halves and
//   the step's V scales, and a step's FP8 sums run under the next step's score product and
//   softmax too, folded into O once they landed.
// Every K and V stage has a full and an empty mbarrier (kernels/common/pipeline.cuh); Q has its own
// pair; on_the_fly adds a `loaded` barrier per K stage and for Q (the copy landed, the quantizers
// may read it), and `full` then counts the quantizer warps. No CTA barrier in the loop: the warpgroups meet only on the work tile's partial last step,
// whose V rows past the tile's keys are zeroed before P V, so that only the sequence's own values
// reach O even where the rows past it are not finite.
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
#include "kernels/prefill/fp8_pv.cuh"
#include "kernels/prefill/launch.hpp"
#include "kernels/prefill/mask.cuh"
#include "kernels/prefill/params.cuh"
#include "kernels/prefill/quantize_ws.cuh"
#include "kernels/prefill/softmax.cuh"
#include "kernels/prefill/tile_scheduler.cuh"
#include "kernels/quant/int8_codes.cuh"

namespace tilemix::gpu {

// Parameters of the warp-specialized kernel: the common ones and the tensor maps of the TMA copies
// (Q, K, V as 64-channel boxes of 128 bytes; Q8, K8 as boxes of all d channels, 64 or 128 bytes;
// K, K8 and V boxes of one routing tile of keys), built on the host.
struct KernelParamsWs {
  KernelParams p;
  CUtensorMap q, k, v, q8, k8;
  PersistentTiles tiles;
  CUtensorMap v8;  // pv fp8 / routed: boxes of 64 keys x d channels (last: the others keep their offsets)
};

// [Q: d / 64 64-channel blocks of 128 rows][Q8: 128 rows of d bytes, routed only][K stage x
// kKStages][V stage x kVStages][on_the_fly: K8 stage x kKStages] | barriers | K scales
// [kKStages][2] | Q scale | the quantizers' scratch. A K or V stage holds a step's
// 128 keys as d / 64 64-channel blocks of 128 rows; an INT8-routed half h holds its 64 K8 rows (d
// bytes each) from byte h * kHalfBytes of the stage, where the first block's rows 64 h .. 64 h + 63
// are, or, in the one-product instance at d = 64, from byte h * kK8HalfBytes, so that two K8 halves
// make one 128-row K8 block (at d = 128 both offsets are the same). on_the_fly keeps the K8 halves
// of stage s in K8 stage s (half h from byte h * kK8HalfBytes), apart from the FP16 rows they are
// coded from. An FP8 P V half (kFp8Pv) holds its V8 box (d rows of 64 keys, 64-byte swizzle) from
// byte h * kHalfBytes of its V stage instead of V's rows, and the step's d V scales (one scale
// block of 128 keys) are in the V scales [kVStages][d]. Every block is 1024-byte aligned (the
// swizzles' address bits).
template <class Cfg, ScorePaths kPaths, bool kFp8Pv = false>
struct PrefillSmemWs {
  static constexpr bool kRouted = kPaths != ScorePaths::fp16;
  static constexpr bool kOnTheFly = kPaths == ScorePaths::routed_on_the_fly;
  static constexpr int kChannelBlocks = Cfg::kHeadDim / 64;
  static constexpr int kQBlockBytes = 128 * Cfg::kBlockM;
  static constexpr int kQ8Bytes = Cfg::kHeadDim * Cfg::kBlockM;
  static constexpr int kK8HalfBytes = Cfg::kHeadDim * Cfg::kRouteTileN;  // one routing tile of K8
  static constexpr int kHalfBytes = 128 * Cfg::kRouteTileN;  // one routing tile's rows of a block
  static constexpr int kBlockBytes = 128 * Cfg::kBlockN;     // a step's rows of a block
  static constexpr int kStageBytes = kChannelBlocks * kBlockBytes;
  static constexpr int kQ = 0;
  static constexpr int kQ8 = kQ + kChannelBlocks * kQBlockBytes;
  static constexpr int kFirstK = kQ8 + (kRouted ? kQ8Bytes : 0);
  static constexpr int kFirstV = kFirstK + Cfg::kKStages * kStageBytes;
  static constexpr int kFirstK8 = kFirstV + Cfg::kVStages * kStageBytes;
  static constexpr int kK8StageBytes = 2 * kK8HalfBytes;
  static constexpr int kBarriers = kFirstK8 + (kOnTheFly ? Cfg::kKStages * kK8StageBytes : 0);
  // k_full[s], k_empty[s], v_full[s], v_empty[s], k_loaded[s], q_full, q_empty, q_loaded
  static constexpr int kBarrierCount = 3 * Cfg::kKStages + 2 * Cfg::kVStages + 3;
  static constexpr int kKScales = kBarriers + 8 * kBarrierCount;
  static constexpr int kQScale = kKScales + 4 * 2 * Cfg::kKStages;
  static constexpr int kVScales = (kQScale + 4 + 15) / 16 * 16;  // 16-byte aligned for the bulk copies
  static constexpr int kVScaleBytes = 4 * Cfg::kHeadDim;          // one step's
  static constexpr int kScratch = kFp8Pv ? kVScales + Cfg::kVStages * kVScaleBytes : kQScale + 4;
  static constexpr int kBytes = kScratch + 4 * Cfg::kQuantizerWarps;
  static constexpr int kAllocBytes = kBytes + 1024;  // the base is aligned at run time
  static_assert(Cfg::kHeadDim == 64 || Cfg::kHeadDim == 128, "Q8 and K8 rows are one 64- or 128-byte swizzled row");
  static_assert(kFirstK % 1024 == 0, "K stages start 1024-byte aligned");
  static_assert(Cfg::kBlockN == 2 * Cfg::kRouteTileN, "a step is two routing tiles");
  static_assert(kAllocBytes <= 227 * 1024, "a CTA may use 227 KB of shared memory");

  __device__ __forceinline__ static char* align(char* raw) {
    const uint32_t misalign = smem_address(raw) & 1023u;
    return raw + ((1024u - misalign) & 1023u);
  }
  __device__ __forceinline__ static int k(int stage) { return kFirstK + stage * kStageBytes; }
  // Where stage `stage`'s K8 rows are: in the K stage (quantize_once's TMA copies) or in its own
  // K8 stage (on_the_fly's codes).
  __device__ __forceinline__ static int k8(int stage) {
    return kOnTheFly ? kFirstK8 + stage * kK8StageBytes : k(stage);
  }
  __device__ __forceinline__ static int v(int stage) { return kFirstV + stage * kStageBytes; }
  __device__ __forceinline__ static uint64_t* barrier(char* smem, int i) {
    return reinterpret_cast<uint64_t*>(smem + kBarriers) + i;
  }
  __device__ __forceinline__ static uint64_t* k_full(char* smem, int s) { return barrier(smem, s); }
  __device__ __forceinline__ static uint64_t* k_empty(char* smem, int s) { return barrier(smem, Cfg::kKStages + s); }
  __device__ __forceinline__ static uint64_t* v_full(char* smem, int s) {
    return barrier(smem, 2 * Cfg::kKStages + s);
  }
  __device__ __forceinline__ static uint64_t* v_empty(char* smem, int s) {
    return barrier(smem, 2 * Cfg::kKStages + Cfg::kVStages + s);
  }
  __device__ __forceinline__ static uint64_t* k_loaded(char* smem, int s) {
    return barrier(smem, 2 * Cfg::kKStages + 2 * Cfg::kVStages + s);
  }
  __device__ __forceinline__ static uint64_t* q_full(char* smem) { return barrier(smem, kBarrierCount - 3); }
  __device__ __forceinline__ static uint64_t* q_empty(char* smem) { return barrier(smem, kBarrierCount - 2); }
  __device__ __forceinline__ static uint64_t* q_loaded(char* smem) { return barrier(smem, kBarrierCount - 1); }
  // Where the copies of Q and of a K stage signal that they landed: `full` itself, or on_the_fly's
  // `loaded`, after which the quantizers signal `full`.
  __device__ __forceinline__ static uint64_t* q_landed(char* smem) { return kOnTheFly ? q_loaded(smem) : q_full(smem); }
  __device__ __forceinline__ static uint64_t* k_landed(char* smem, int s) {
    return kOnTheFly ? k_loaded(smem, s) : k_full(smem, s);
  }
  __device__ __forceinline__ static float* q_scale(char* smem) { return reinterpret_cast<float*>(smem + kQScale); }
  __device__ __forceinline__ static float* scratch(char* smem) { return reinterpret_cast<float*>(smem + kScratch); }
  __device__ __forceinline__ static float* k_scale(char* smem, int stage, int half) {
    return reinterpret_cast<float*>(smem + kKScales) + 2 * stage + half;
  }
  __device__ __forceinline__ static int v_scales(int stage) { return kVScales + stage * kVScaleBytes; }
};

// Position in a ring of stages, shared by producer and consumers: pass `it` over the ring uses
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

// The routes of a step's two halves (a half past the work tile's last key tile takes none).
struct StepRoutes {
  bool halves2 = false;  // the step's second routing tile exists
  bool int8[2] = {false, false};

  template <bool kRouted>
  __device__ __forceinline__ void next(TileRoutes& routes, const BlockInfo& blk, int step) {
    halves2 = 2 * step + 1 < blk.key_tiles;
    int8[0] = kRouted && routes.next();
    int8[1] = kRouted && halves2 && routes.next();
  }
  // Whether half h takes FP8 P V under kPv (pv fp8: every existing half; pv routed: the
  // INT8-routed ones).
  template <PvPaths kPv>
  __device__ __forceinline__ bool fp8(int h) const {
    if constexpr (kPv == PvPaths::fp16) {
      return false;
    } else {
      return (h == 0 || halves2) && (kPv == PvPaths::fp8 || int8[h]);
    }
  }
  // The step's FP8 group: bit h for half h.
  template <PvPaths kPv>
  __device__ __forceinline__ unsigned fp8_halves() const {
    return (fp8<kPv>(0) ? 1u : 0u) | (fp8<kPv>(1) ? 2u : 0u);
  }
};

// kUniformSteps: the two halves of every step take one path (flash_fp16, or a plan whose steps
// never mix routes: PrefillParams::uniform_steps), so a step's scores are one m64n128 product;
// otherwise one m64n64 product per half. kHalfAccum: P V accumulates in fp16 (accum fp16).
// kPv: P V per half, FP8 (fp8_pv.cuh) for the halves StepRoutes::fp8 names, FP16 for the others
// (pv fp8 / routed; fp32 accumulation).
template <class Cfg, ScorePaths kPaths, bool kUniformSteps, bool kHalfAccum, PvPaths kPv = PvPaths::fp16>
struct MainloopWs {
  static constexpr bool kFp8Pv = kPv != PvPaths::fp16;
  static_assert(!(kFp8Pv && kHalfAccum), "FP8 P V accumulates in fp32");
  static_assert(kPv != PvPaths::routed || kPaths != ScorePaths::fp16, "routed P V follows the score routes");
  static constexpr bool kRouted = kPaths != ScorePaths::fp16;
  static constexpr bool kOnceCopies = kPaths == ScorePaths::routed_quantize_once;  // TMA brings Q8 and K8
  static constexpr bool kOnTheFly = kPaths == ScorePaths::routed_on_the_fly;
  // Whether a step's P V runs under the next step's scores. FP8 P V does at d = 64, and at d = 128
  // with pv fp8 where a step's halves share one score path (uniform steps); elsewhere its products
  // are waited for before the next step's scores: in flight beside those, the FP8 sums (32
  // registers) made ptxas spill 480-950 bytes with per-half score paths, and with pv routed the
  // fold into an O that FP16 halves accumulate into serialized the wgmmas (C7515).
  static constexpr bool kPvInFlight =
      kPv == PvPaths::fp16 || Cfg::kHeadDim == 64 || (kPv == PvPaths::fp8 && kUniformSteps);
  // Whether the consumer warpgroups take turns at issuing products (WarpgroupTurns): with FP8
  // P V, where in a same-run A/B at d = 128 they made pv routed 2-5% faster and left pv fp8 within
  // noise; with FP16 P V they made `one` and sptrans 50% up to 6% slower
  // (results/h200/experiments/warpgroup-turns/).
  static constexpr bool kTurns = kFp8Pv;
  static constexpr const char* kLaunchName = "launch of prefill_kernel_ws (warp-specialized mainloop)";
  using Smem = PrefillSmemWs<Cfg, kPaths, kFp8Pv>;
  using Softmax = OnlineSoftmax<Cfg::kRowSlices, Cfg::kKeyFrags>;
  using Scores = float[Cfg::kRowSlices][Cfg::kKeyFrags][4];
  using KRing = RingPosition<Cfg::kKStages>;
  using VRing = RingPosition<Cfg::kVStages>;
  static constexpr int D = Cfg::kHeadDim;
  static constexpr int kHalfN = Cfg::kRouteTileN;
  // Where an INT8-routed half's K8 rows start in Smem::k8 (PrefillSmemWs).
  static constexpr int kK8HalfOffset = kUniformSteps || kOnTheFly ? Smem::kK8HalfBytes : Smem::kHalfBytes;
  static constexpr int kQuantizerThreads = 32 * Cfg::kQuantizerWarps;

  static constexpr unsigned kQuantizerBarrier = 2;  // named barrier 1: zero_v_rows
  // Arrivals that release a K or V stage: one per consumer warp, or with FP8 P V one per consumer
  // thread, since each thread reads the stage's K and V scales that the producer's copies write
  // (compute-sanitizer's racecheck reported a warp's single arrive after __syncwarp as a race).
  static constexpr unsigned kStageReleases = kFp8Pv ? Cfg::kThreads : Cfg::kWarps;
  __device__ __forceinline__ static void release_stage(uint64_t* empty, int lane) {
    if constexpr (kFp8Pv) {
      mbarrier_arrive(empty);
    } else {
      release_by_warp(empty, lane);
    }
  }
  // One arrive per warp (Q's empty barrier, and K and V without FP8 P V).
  __device__ __forceinline__ static void release_by_warp(uint64_t* empty, int lane) {
    __syncwarp();  // every lane's reads come before the warp's arrive
    if (lane == 0) mbarrier_arrive(empty);
  }

  // With kTurns the consumer warpgroups take turns at issuing products (named barrier 3 + w:
  // warpgroup w's turn), so that one's score product and P V run on the tensor cores while the
  // other runs its softmax, rather than both issuing together and then both leaving the tensor
  // cores idle for their softmax. Both take the same turns (the CTA's tiles and steps, routed
  // alike); warpgroup 1 passes the first turn to warpgroup 0, and warpgroup 0 takes the last pass
  // back at the end, so that no arrival is left pending. No warpgroup waits for the other inside
  // its turn (zero_v_rows meets outside).
  struct WarpgroupTurns {
    static constexpr unsigned kFirstBarrier = 3;  // 1: zero_v_rows, 2: the quantizers
    int wg;
    __device__ __forceinline__ void take() const {
      if constexpr (kTurns) named_barrier_sync(kFirstBarrier + wg, Cfg::kThreads);
    }
    __device__ __forceinline__ void pass() const {
      if constexpr (kTurns) named_barrier_arrive(kFirstBarrier + (wg ^ 1), Cfg::kThreads);
    }
    __device__ __forceinline__ void begin() const {
      if (wg == 1) pass();
    }
    __device__ __forceinline__ void end() const {
      if (wg == 0) take();
    }
  };
  static_assert(Cfg::kConsumerWarpgroups == 2, "turns between two consumer warpgroups");

  // Barrier arrivals: the producer's one arrive.expect_tx per fill (on_the_fly: of Q and K into
  // `loaded`, then one arrive per quantizer warp into `full`); one arrive per consumer warp per
  // release.
  __device__ __forceinline__ static void init_barriers(char* smem) {
    const unsigned full_arrivals = kOnTheFly ? Cfg::kQuantizerWarps : 1;
    for (int s = 0; s < Cfg::kKStages; ++s) {
      mbarrier_init(Smem::k_full(smem, s), full_arrivals);
      mbarrier_init(Smem::k_empty(smem, s), kStageReleases);
      mbarrier_init(Smem::k_loaded(smem, s), 1);
    }
    for (int s = 0; s < Cfg::kVStages; ++s) {
      mbarrier_init(Smem::v_full(smem, s), 1);
      mbarrier_init(Smem::v_empty(smem, s), kStageReleases);
    }
    mbarrier_init(Smem::q_full(smem), full_arrivals);
    mbarrier_init(Smem::q_empty(smem), Cfg::kWarps);
    mbarrier_init(Smem::q_loaded(smem), 1);
    fence_barrier_init();
  }

  __device__ __forceinline__ static int steps(const BlockInfo& blk) { return (blk.key_tiles + 1) / 2; }

  // The producer's single issuing thread: every work tile of this CTA, in the consumers' order.
  __device__ __forceinline__ static void produce(const KernelParamsWs& w, char* smem) {
    const KernelParams& p = w.p;
    const uint32_t base = smem_address(smem);
    tma_prefetch_descriptor(&w.q);
    tma_prefetch_descriptor(&w.k);
    tma_prefetch_descriptor(&w.v);
    if constexpr (kOnceCopies) {
      tma_prefetch_descriptor(&w.q8);
      tma_prefetch_descriptor(&w.k8);
    }
    if constexpr (kFp8Pv) tma_prefetch_descriptor(&w.v8);
    KRing k_ring;
    VRing v_ring;
    unsigned q_parity = 0;
    for (int64_t t = blockIdx.x; t < w.tiles.count(); t += gridDim.x) {
      BlockInfo blk;
      if (!w.tiles.template block<Cfg::kBlockM, Cfg::kRouteTileN>(p, t, blk)) continue;
      TileRouting routing;
      routing.template load<kRouted>(p, blk);
      const int q_token0 = static_cast<int>(blk.q_token0<Cfg::kBlockM>(p));
      const int k_token0 = static_cast<int>(blk.k_token0(p));

      // Q (and Q8) once the consumers are done with the previous tile's.
      mbarrier_wait(Smem::q_empty(smem), q_parity ^ 1u);
      const bool q8 = kOnceCopies && routing.any_int8;
      uint64_t* q_landed = Smem::q_landed(smem);
      mbarrier_arrive_expect_tx(q_landed, Smem::kChannelBlocks * Smem::kQBlockBytes + (q8 ? Smem::kQ8Bytes : 0));
#pragma unroll
      for (int c = 0; c < Smem::kChannelBlocks; ++c) {
        tma_load_3d(base + Smem::kQ + c * Smem::kQBlockBytes, &w.q, q_landed, 64 * c, blk.h, q_token0);
      }
      if constexpr (kOnceCopies) {
        if (q8) tma_load_3d(base + Smem::kQ8, &w.q8, q_landed, 0, blk.h, q_token0);
      }
      q_parity ^= 1u;

      TileRoutes routes(routing.word, routing.group, 0);
      for (int n = 0; n < steps(blk); ++n) {
        StepRoutes step;
        step.template next<kRouted>(routes, blk, n);
        const int key = k_token0 + n * Cfg::kBlockN;
        // K: per half, K8 for an INT8-routed tile (its scale beside it) or K; no copy for a half
        // past the tile's keys (the mask sets its scores to -inf).
        mbarrier_wait(Smem::k_empty(smem, k_ring.stage), k_ring.parity ^ 1u);
        uint64_t* k_landed = Smem::k_landed(smem, k_ring.stage);
        const int halves = step.halves2 ? 2 : 1;
        unsigned bytes = 0;
        for (int h = 0; h < halves; ++h) {
          bytes += kOnceCopies && step.int8[h] ? Smem::kK8HalfBytes : Smem::kChannelBlocks * Smem::kHalfBytes;
          // The scale is stored before the arrive, whose release publishes it with the copy.
          if (kOnceCopies && step.int8[h]) {
            *Smem::k_scale(smem, k_ring.stage, h) =
                p.k_scale[(p.k_block_offset[blk.b] + 2 * n + h) * p.hk + blk.kv_head];
          }
        }
        mbarrier_arrive_expect_tx(k_landed, bytes);
        for (int h = 0; h < halves; ++h) {
          const uint32_t stage = base + Smem::k(k_ring.stage);
          if (kOnceCopies && step.int8[h]) {
            tma_load_3d(stage + h * kK8HalfOffset, &w.k8, k_landed, 0, blk.kv_head, key + h * kHalfN);
          } else {
#pragma unroll
            for (int c = 0; c < Smem::kChannelBlocks; ++c) {
              tma_load_3d(stage + h * Smem::kHalfBytes + c * Smem::kBlockBytes, &w.k, k_landed, 64 * c, blk.kv_head,
                          key + h * kHalfN);
            }
          }
        }
        k_ring.advance();
        // V: both halves (rows past the tensor read as zeros; the consumers zero the rows past
        // the sequence's keys).
        mbarrier_wait(Smem::v_empty(smem, v_ring.stage), v_ring.parity ^ 1u);
        uint64_t* v_full = Smem::v_full(smem, v_ring.stage);
        if constexpr (kFp8Pv) {
          // Per existing half: V8 (FP8 halves) or V (FP16 halves), none past the tile; the scales
          // of the step's 128 keys once for an FP8 group (both of its blocks hold them).
          const int64_t v_block0 = p.k_block_offset[blk.b] + 2 * n;
          const unsigned group = step.template fp8_halves<kPv>();
          unsigned v_bytes = group ? Smem::kVScaleBytes : 0;
          for (int h = 0; h < halves; ++h) {
            v_bytes += step.template fp8<kPv>(h) ? D * kHalfN : Smem::kChannelBlocks * Smem::kHalfBytes;
          }
          mbarrier_arrive_expect_tx(v_full, v_bytes);
          if (group) {
            bulk_load(base + Smem::v_scales(v_ring.stage), p.v_scale + (v_block0 * p.hk + blk.kv_head) * D,
                      Smem::kVScaleBytes, v_full);
          }
          for (int h = 0; h < halves; ++h) {
            const uint32_t half = base + Smem::v(v_ring.stage) + h * Smem::kHalfBytes;
            if (step.template fp8<kPv>(h)) {
              tma_load_3d(half, &w.v8, v_full, static_cast<int>((v_block0 + h) * kHalfN), 0, blk.kv_head);
            } else {
#pragma unroll
              for (int c = 0; c < Smem::kChannelBlocks; ++c) {
                tma_load_3d(half + c * Smem::kBlockBytes, &w.v, v_full, 64 * c, blk.kv_head, key + h * kHalfN);
              }
            }
          }
        } else {
          mbarrier_arrive_expect_tx(v_full, Smem::kStageBytes);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int c = 0; c < Smem::kChannelBlocks; ++c) {
              tma_load_3d(base + Smem::v(v_ring.stage) + c * Smem::kBlockBytes + h * Smem::kHalfBytes, &w.v, v_full,
                          64 * c, blk.kv_head, key + h * kHalfN);
            }
          }
        }
        v_ring.advance();
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
    const uint64_t q8_desc = int8_rows_desc<D>(base + Smem::kQ8 + wg_row0 * D);
    KRing k_ring;
    VRing v_ring;
    unsigned q_parity = 0;
    // The warpgroup from a warp-uniform index: from tid, ptxas took the turns' branches for
    // divergent ones (it spilled 400 bytes and serialized the FP8 P V instances' wgmmas, C7520).
    WarpgroupTurns turns{warp_index_uniform() / 4 - 1};
    turns.begin();
    for (int64_t t = blockIdx.x; t < w.tiles.count(); t += gridDim.x) {
      BlockInfo blk;
      if (!w.tiles.template block<Cfg::kBlockM, Cfg::kRouteTileN>(p, t, blk)) continue;
      TileRouting routing;
      routing.template load<kRouted>(p, blk);
      // One work tile, routed or on the FP16 path alone: in the one-product instance a tile with
      // no INT8-routed key tile decodes no route and selects no scale, as flash_fp16 does.
      const auto tile = [&](auto routed) {
        constexpr bool kTileRouted = decltype(routed)::value;
        Softmax softmax;
        softmax.init();
        OutputAccumulator<Cfg, kHalfAccum> o;
        o.zero();
        auto& acc_o = o.wgmma_registers();

        mbarrier_wait(Smem::q_full(smem), q_parity);
        q_parity ^= 1u;
        float q_factor = 0.0f;  // scale_q * scale_log2 (the query tile is one Q scale block)
        if (kTileRouted && routing.any_int8) {
          const float q_scale =
              kOnTheFly ? *Smem::q_scale(smem) : p.q_scale[(p.q_block_offset[blk.b] + blk.m) * p.hq + blk.h];
          q_factor = __fmul_rn(q_scale, p.scale_log2);
        }
        TileRoutes routes(routing.word, routing.group, 0);
        const int last = steps(blk) - 1;
        // Keys of the last step whose V rows stay: those of the sequence and of the tile's key tiles.
        const int last_valid = min(blk.lk, blk.key_tiles * kHalfN) - last * Cfg::kBlockN;

        // Step n's scores: issued (S = Q K^T or Q8 K8^T, per half or per step), then finished once
        // they landed (raw fp32 scores and each half's scale into the log2 domain, masked), then the
        // softmax turns them into P with the scale folded into its exponent. Both score products of
        // a half accumulate into the same 32 integer registers (s32 or the f32 bits), so that one
        // register set is in flight however the halves are routed. (An m64n128 product beside
        // m64n64 products on the same registers in one kernel made ptxas serialize every wgmma of
        // it, warning C7511: hence two instances.)
        StepRoutes step;
        float k_scale[2] = {0.0f, 0.0f};
        float scale[2] = {0.0f, 0.0f};  // the step's score scale per half
        // Step n's routes, and its K stage landed (with the INT8 halves' K scales).
        const auto await_k = [&](int n, const KRing& at) {
          step.template next<kTileRouted>(routes, blk, n);
          mbarrier_wait(Smem::k_full(smem, at.stage), at.parity);
          if (kTileRouted) {
            if (step.int8[0]) k_scale[0] = *Smem::k_scale(smem, at.stage, 0);
            if (step.int8[1]) k_scale[1] = *Smem::k_scale(smem, at.stage, 1);
          }
        };
        const auto issue_scores = [&](const KRing& at, uint32_t (&lo)[32], uint32_t (&hi)[32]) {
          const uint32_t k_base = base + Smem::k(at.stage), k8_base = base + Smem::k8(at.stage);
          if constexpr (kUniformSteps) {
            // A missing second half reads a stale stage: scores the mask sets to -inf.
            if (kTileRouted && step.int8[0]) {
              wgmma_scores_s8_n128<D>(lo, hi, q8_desc, int8_rows_desc<D>(k8_base));
            } else {
              wgmma_scores_f16_n128<D>(lo, hi, q_desc, Smem::kQBlockBytes, sw128_desc(k_base), Smem::kBlockBytes);
            }
            return;
          }
          if (kTileRouted && step.int8[0]) {
            wgmma_scores_s8<D>(lo, q8_desc, int8_rows_desc<D>(k8_base));
          } else {
            wgmma_scores_f16<D>(lo, q_desc, Smem::kQBlockBytes, sw128_desc(k_base), Smem::kBlockBytes);
          }
          if (step.halves2) {
            if (kTileRouted && step.int8[1]) {
              wgmma_scores_s8<D>(hi, q8_desc, int8_rows_desc<D>(k8_base + kK8HalfOffset));
            } else {
              wgmma_scores_f16<D>(hi, q_desc, Smem::kQBlockBytes, sw128_desc(k_base + Smem::kHalfBytes),
                                  Smem::kBlockBytes);
            }
          }
        };
        const auto finish_scores = [&](int n, const KRing& at, uint32_t (&lo)[32], uint32_t (&hi)[32], Scores& s) {
          float (&x)[64] = reinterpret_cast<float(&)[64]>(s);
          wgmma_fence_operands(lo);
          wgmma_fence_operands(hi);
          // The scores are in registers: the K stage goes back to the producer.
          release_stage(Smem::k_empty(smem, at.stage), lane);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            // Raw scores, the scale of the half beside them (folded into the softmax's exponent):
            // the INT8 path's exact float(C) with (scale_q * scale_log2) * scale_k, as MainloopSm90
            // forms the factor, or the FP16 path's fp32 sums with scale_log2.
            if (kTileRouted && step.int8[h]) {
              scale[h] = __fmul_rn(q_factor, k_scale[h]);
#pragma unroll
              for (int i = 0; i < 32; ++i) x[32 * h + i] = int8_dot_to_float(static_cast<int>(h == 0 ? lo[i] : hi[i]));
            } else {
              scale[h] = p.scale_log2;
#pragma unroll
              for (int i = 0; i < 32; ++i) x[32 * h + i] = __uint_as_float(h == 0 ? lo[i] : hi[i]);
            }
          }
          // The tile's last score product has read Q: the producer may bring the next tile's.
          if (n == last) release_by_warp(Smem::q_empty(smem), lane);
          if (TileMask<Cfg>::needed(blk, n, p.causal)) TileMask<Cfg>::apply(s, blk, n, p.causal, warp, lane);
        };
        // P of a step as the A fragments of P V: the k16 step kk covers keys 16 kk .. 16 kk + 15,
        // score fragments 2 kk and 2 kk + 1. kFp8Pv: an FP8 half's P8 takes the first two of its
        // four k16 slots (its two k32 steps), with its group's factors beside.
        uint32_t a[Cfg::kBlockN / 16][4];
        [[maybe_unused]] StepRoutes packed;  // kFp8Pv: the routes of the step whose P is in `a`
        [[maybe_unused]] unsigned fp8_group = 0;  // its FP8 halves (bit h: half h)
        [[maybe_unused]] float fp8_g[Softmax::kRows];  // its group's g per row (update_fused_fp8)
        [[maybe_unused]] float sums[kFp8Pv ? 32 : 1];  // its FP8 group's sums of 64 channels
        const auto pack_half_fp16 = [&](const Scores& s, int kk) {
          a[kk][0] = pack_half2(s[0][2 * kk][0], s[0][2 * kk][1]);
          a[kk][1] = pack_half2(s[0][2 * kk][2], s[0][2 * kk][3]);
          a[kk][2] = pack_half2(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
          a[kk][3] = pack_half2(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
        };
        // The softmax of the step in `step`: with an FP8 group its g per row in group_g (0 without
        // a group: defined every step, else the registers live on across steps without a group).
        // pv fp8 puts both halves in the group: a missing second half's scores are -inf, its p 0.
        const auto softmax_step = [&](Scores& s, float (&alpha)[Softmax::kRows], float (&group_g)[Softmax::kRows]) {
          if constexpr (kFp8Pv) {
            softmax.template update_fused_fp8<kPv == PvPaths::fp8>(s, scale, p.fp16_state, alpha,
                                                                   step.template fp8_halves<kPv>(), group_g);
          } else {
            softmax.update_fused(s, scale, p.fp16_state, alpha);
          }
        };
        const auto pack_p = [&](const Scores& s, const float (&group_g)[Softmax::kRows]) {
          if constexpr (kFp8Pv) {
            packed = step;
            fp8_group = packed.template fp8_halves<kPv>();
#pragma unroll
            for (int r = 0; r < Softmax::kRows; ++r) fp8_g[r] = group_g[r];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              if (fp8_group >> h & 1u) {
                pack_fp8_half<Cfg::kKeyFrags>(s[0], h, reinterpret_cast<uint32_t(&)[2][4]>(a[4 * h]));
                if constexpr (kPv == PvPaths::routed) {
                  // The half's unused slots defined each step: else they live on from an FP16 half.
#pragma unroll
                  for (int i = 0; i < 4; ++i) a[4 * h + 2][i] = a[4 * h + 3][i] = 0u;
                }
              } else if (kPv == PvPaths::routed) {  // pv fp8: a half outside the group does not exist
#pragma unroll
                for (int kk = 4 * h; kk < 4 * h + 4; ++kk) pack_half_fp16(s, kk);
              }
            }
          } else {
#pragma unroll
            for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk) pack_half_fp16(s, kk);
          }
        };
        // Step n's V stage landed, with the rows past the keys of a partial last step zeroed where
        // an FP16 half reads them (a partial first half has no second one, so the rows to the
        // stage's end are all the partial half's or unused; an FP8 half's V8 is zero there).
        const auto await_v = [&](int n, const VRing& at) {
          mbarrier_wait(Smem::v_full(smem, at.stage), at.parity);
          if constexpr (kPv != PvPaths::fp8) {
            if (n == last && last_valid < Cfg::kBlockN && !(fp8_group >> (last_valid / kHalfN) & 1u)) {
              zero_v_rows(smem, at.stage, last_valid, tid);
            }
          }
        };
        // The P V of the step whose P is in `a` (kPvInFlight: in flight under the next step's
        // scores, one commit group), its stage awaited (await_v). kPv fp16: one product into O.
        // kFp8Pv: with pv routed the FP16 halves into O (each waited for where P V is not in
        // flight), then the FP8 group's sums of the first 64 channels (finish_pv folds them and
        // takes the other channels).
        const auto issue_pv = [&](const VRing& at) {
          const uint32_t stage = base + Smem::v(at.stage);
          if constexpr (kPv == PvPaths::fp16) {
            wgmma_pv_k128<D>(acc_o, a, sw128_desc_mn(stage, Smem::kBlockBytes));
          } else {
            if constexpr (kPv == PvPaths::routed) {
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                if (!(fp8_group >> h & 1u) && (h == 0 || packed.halves2)) {
                  wgmma_pv_half<D>(acc_o, reinterpret_cast<const uint32_t(&)[4][4]>(a[4 * h]),
                                   sw128_desc_mn(stage + h * Smem::kHalfBytes, Smem::kBlockBytes));
                  if constexpr (!kPvInFlight) {
                    wgmma_commit();
                    wgmma_wait_all();
                    wgmma_fence_operands(acc_o);
                  }
                }
              }
            }
            if (fp8_group) issue_fp8_sums(sums, a, stage, Smem::kHalfBytes, fp8_group, 0);
            wgmma_commit();
          }
        };
        // P V of a step landed: kFp8Pv folds the FP8 group's sums into O, 64 channels at a time,
        // each further block's sums issued once the block before is folded (before the V stage,
        // which holds their scales, goes back to the producer).
        const auto finish_pv = [&](const VRing& at) {
          wgmma_fence_operands(acc_o);
          if constexpr (kFp8Pv) {
            if (fp8_group) {
              const float* scales = reinterpret_cast<const float*>(smem + Smem::v_scales(at.stage));
#pragma unroll
              for (int cb = 0; cb < D / 64; ++cb) {
                if (cb > 0) {
                  issue_fp8_sums(sums, a, base + Smem::v(at.stage), Smem::kHalfBytes, fp8_group, cb);
                  wgmma_commit();
                  wgmma_wait_all();
                }
                wgmma_fence_operands(sums);
                fold_fp8_sums<D>(acc_o, sums, scales, fp8_g, lane, cb);
              }
            }
          }
          release_stage(Smem::v_empty(smem, at.stage), lane);
          if (p.fp16_state) o.round_to_half_state();
        };

        // Step n's P V runs under step n + 1's score product and softmax (kPvInFlight; else before
        // it): the steps per element (O = O * alpha_n+1 + P_n+1 V_n+1 after O += P_n V_n) are
        // those of the sequential loop. Every issue of products is a turn (WarpgroupTurns), taken
        // once its stages landed.
        if (last >= 0) {
          {
            uint32_t lo[32], hi[32];
            Scores s;
            await_k(0, k_ring);
            turns.take();
            issue_scores(k_ring, lo, hi);
            turns.pass();
            wgmma_wait_all();
            finish_scores(0, k_ring, lo, hi, s);
            float alpha[Softmax::kRows], group_g[Softmax::kRows];
            softmax_step(s, alpha, group_g);  // O is zero: alpha is not needed
            pack_p(s, group_g);
          }
          k_ring.advance();
          for (int n = 1; n <= last; ++n) {
            if constexpr (!kPvInFlight) {
              await_v(n - 1, v_ring);
              turns.take();
              issue_pv(v_ring);
              turns.pass();
              wgmma_wait_all();
              finish_pv(v_ring);
            }
            uint32_t lo[32], hi[32];  // the step's s32 or f32 scores by half, in flight until the wait
            Scores s;
            await_k(n, k_ring);
            if constexpr (kPvInFlight) await_v(n - 1, v_ring);
            turns.take();
            issue_scores(k_ring, lo, hi);
            if constexpr (kPvInFlight) issue_pv(v_ring);
            turns.pass();
            wgmma_wait<kPvInFlight ? 1 : 0>();  // the scores landed; P V may still run
            finish_scores(n, k_ring, lo, hi, s);
            float alpha[Softmax::kRows], group_g[Softmax::kRows];
            softmax_step(s, alpha, group_g);
            if constexpr (kPvInFlight) {
              wgmma_wait_all();
              finish_pv(v_ring);
            }
            if (Softmax::any_moved(alpha)) o.rescale(alpha);
            pack_p(s, group_g);
            k_ring.advance();
            v_ring.advance();
          }
          await_v(last, v_ring);
          turns.take();
          issue_pv(v_ring);
          turns.pass();
          wgmma_wait_all();
          finish_pv(v_ring);
          v_ring.advance();
        } else if (lane == 0) {
          mbarrier_arrive(Smem::q_empty(smem));
        }
        Epilogue::store_direct(p, blk, softmax, o, warp, lane);
      };
      // The two-product instance keeps one body: a second made ptxas spill 120 bytes.
      if constexpr (!kRouted) {
        tile(std::false_type{});
      } else if constexpr (!kUniformSteps) {
        tile(std::true_type{});
      } else if (routing.any_int8) {
        tile(std::true_type{});
      } else {
        tile(std::false_type{});
      }
    }
    turns.end();
  }

  // on_the_fly, the quantizer warps (`qtid` 0 .. kQuantizerThreads - 1): for every work tile of the
  // CTA, in the producer's order, Q8 and Q's scale once Q landed (when some key tile is INT8),
  // then per step each INT8-routed half's K8 and K scale once the K stage landed; every quantizer
  // warp then arrives on `full`, which releases the codes and scales to the consumers.
  __device__ __forceinline__ static void quantize(const KernelParamsWs& w, char* smem, int qtid) {
    static_assert(kOnTheFly, "quantize_once copies its codes");
    const KernelParams& p = w.p;
    const int lane = qtid & 31;
    float* scratch = Smem::scratch(smem);
    KRing k_ring;
    unsigned q_parity = 0;
    for (int64_t t = blockIdx.x; t < w.tiles.count(); t += gridDim.x) {
      BlockInfo blk;
      if (!w.tiles.template block<Cfg::kBlockM, Cfg::kRouteTileN>(p, t, blk)) continue;
      TileRouting routing;
      routing.template load<true>(p, blk);
      mbarrier_wait(Smem::q_loaded(smem), q_parity);
      q_parity ^= 1u;
      if (routing.any_int8) {
        const float scale = quantize_resident_rows<Cfg::kBlockM, D, kQuantizerThreads>(
            smem + Smem::kQ, Smem::kQBlockBytes, smem + Smem::kQ8, blk.rows, qtid, scratch, kQuantizerBarrier);
        if (qtid == 0) *Smem::q_scale(smem) = scale;
      }
      __syncwarp();
      if (lane == 0) mbarrier_arrive(Smem::q_full(smem));
      TileRoutes routes(routing.word, routing.group, 0);
      for (int n = 0; n < steps(blk); ++n) {
        StepRoutes step;
        step.template next<true>(routes, blk, n);
        mbarrier_wait(Smem::k_loaded(smem, k_ring.stage), k_ring.parity);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (!step.int8[h]) continue;
          const int key0 = (2 * n + h) * kHalfN;  // the half's first key in the sequence
          const float scale = quantize_resident_rows<kHalfN, D, kQuantizerThreads>(
              smem + Smem::k(k_ring.stage) + h * Smem::kHalfBytes, Smem::kBlockBytes,
              smem + Smem::k8(k_ring.stage) + h * kK8HalfOffset, min(kHalfN, blk.lk - key0), qtid, scratch,
              kQuantizerBarrier);
          if (qtid == 0) *Smem::k_scale(smem, k_ring.stage, h) = scale;
        }
        __syncwarp();
        if (lane == 0) mbarrier_arrive(Smem::k_full(smem, k_ring.stage));
        k_ring.advance();
      }
    }
  }

  // V rows [valid, kBlockN) of a stage to zero: past the sequence end the stage holds another
  // sequence's keys (or TMA's zeros past the tensor), and past the work tile's key tiles keys no
  // row sees, which P = 0 must not multiply into NaN. Every consumer thread has waited for the
  // stage to land; both warpgroups read the whole step, so they meet once the zeros are written.
  __device__ __forceinline__ static void zero_v_rows(char* smem, int stage, int valid, int tid) {
    constexpr int kChunksPerRow = 8;  // 16-byte chunks of a 128-byte row
    const int block_chunks = (Cfg::kBlockN - valid) * kChunksPerRow;
    char* v = smem + Smem::v(stage);
    for (int i = tid; i < block_chunks * Smem::kChannelBlocks; i += Cfg::kThreads) {
      const int block = i / block_chunks, in_block = i % block_chunks;
      const int row = valid + in_block / kChunksPerRow;
      *reinterpret_cast<uint4*>(v + block * Smem::kBlockBytes + row * 128 + (in_block % kChunksPerRow) * 16) =
          make_uint4(0u, 0u, 0u, 0u);
    }
    fence_proxy_async_shared();  // the zeros reach wgmma's operand reads
    named_barrier_sync(1, Cfg::kThreads);
  }
};

}  // namespace tilemix::gpu
