#pragma once
// The consumers of the warp-specialized prefill kernel: two warpgroups of 64 query rows each, in
// steps of two routing tiles (128 keys: the online softmax updates once per step) with the same
// routes, score products, mask and scale factors as MainloopSm90, the scale folded into the
// softmax's exponent (one FMA per score, OnlineSoftmax::update_fused). The emulator follows with
// softmax_tiles = 2 and fused_score_scale (gpu::prefill_step_numerics). Per step: wait for the K
// stage, S = Q K^T or Q8 K8^T per half (wgmma from shared memory), release the K stage once the
// scores landed, mask, softmax, O += P V, release the V stage; a step's P V runs under the next
// step's score product and softmax. With FP8 P V (kPv, fp8_pv.cuh) a step's FP8 sums run under
// the next step's score product and softmax too, folded into O once they landed. No CTA barrier
// in the loop: the warpgroups meet only on the work tile's partial last step, whose V rows past
// the tile's keys are zeroed before P V, so that only the sequence's own values reach O even
// where the rows past it are not finite. O is stored straight from registers (EpilogueDirect).
// Before a work tile with an INT8-routed key tile, each warpgroup codes its half of Q8 from the
// landed Q (quantize_resident_half), in both modes: no Q pass, no Q8 in memory.
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/mma.cuh"
#include "kernels/common/pipeline.cuh"
#include "kernels/common/tile_routes.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/prefill/accumulator.cuh"
#include "kernels/prefill/fp8_pv.cuh"
#include "kernels/prefill/kernel_traits_ws.cuh"
#include "kernels/prefill/mask.cuh"
#include "kernels/prefill/onchip_quant.cuh"
#include "kernels/prefill/softmax.cuh"
#include "kernels/quant/int8_codes.cuh"

namespace tilemix::gpu {

// The consumers of one instance (Kernel: its KernelTraitsWs).
template <class Kernel>
struct ConsumerWs {
  using Cfg = typename Kernel::Cfg;
  using Storage = typename Kernel::Storage;
  static constexpr PvPaths kPv = Kernel::kPv;
  static constexpr bool kRouted = Kernel::kRouted, kFp8Pv = Kernel::kFp8Pv;
  static constexpr bool kUniformSteps = Kernel::kUniformSteps, kHalfAccum = Kernel::kHalfAccum;
  static constexpr int D = Kernel::D;
  static constexpr int kHalfN = Kernel::kHalfN;
  using Softmax = OnlineSoftmax<Cfg::kRowSlices, Cfg::kKeyFrags>;
  using Scores = float[Cfg::kRowSlices][Cfg::kKeyFrags][4];
  using KPipeline = typename Storage::KPipeline;
  using VPipeline = typename Storage::VPipeline;
  // Whether a step's P V runs under the next step's scores. FP8 P V does at d = 64, and at d = 128
  // with pv fp8 where a step's halves share one score path (uniform steps); elsewhere its products
  // are waited for before the next step's scores: in flight beside those, the FP8 sums (32
  // registers) made ptxas spill 480-950 bytes with per-half score paths, and with pv routed the
  // fold into an O that FP16 halves accumulate into serialized the wgmmas (C7515).
  static constexpr bool kPvInFlight =
      kPv == PvPaths::fp16 || Cfg::kHeadDim == 64 || (kPv == PvPaths::fp8 && kUniformSteps);
  // Whether the warpgroups take turns at issuing products: with FP8 P V, where in a same-run A/B
  // at d = 128 they made pv routed 2-5% faster and left pv fp8 within noise; with FP16 P V they
  // made `one` and sptrans 50% up to 6% slower (results/h200/experiments/warpgroup-turns/). Both
  // take the same turns (the CTA's tiles and steps, routed alike), and no warpgroup waits for the
  // other inside its turn (zero_v_rows meets outside).
  static constexpr bool kTurns = kFp8Pv;
  using Turns = WarpgroupTurns<kTurns, static_cast<unsigned>(NamedBarrierWs::consumer_turns), Cfg::kThreads>;
  static_assert(Cfg::kConsumerWarpgroups == 2, "turns between two consumer warpgroups");

  // Arrivals that release a K or V stage: one per consumer warp, or with FP8 P V one per consumer
  // thread, since each thread reads the stage's K and V scales that the producer's copies write
  // (compute-sanitizer's racecheck reported a warp's single arrive after __syncwarp as a race).
  // Q is released per thread: each reads the work tile slot that the producer writes.
  static constexpr unsigned kStageReleases = kFp8Pv ? Cfg::kThreads : Cfg::kWarps;
  static constexpr unsigned kQReleases = Cfg::kThreads;
  template <class Pipeline>
  __device__ __forceinline__ static void release_stage(const Pipeline& ring, int lane) {
    if constexpr (kFp8Pv) {
      ring.release();
    } else {
      ring.release_by_warp(lane);
    }
  }

  // A consumer warpgroup (index `wg` 0 or 1 of the consumers; `tid` 0..255 over both): every work
  // tile of this CTA as the producer hands them out, its rows 64 wg .. 64 wg + 63 of each.
  template <class Epilogue>
  __device__ __forceinline__ static void run(const KernelParamsWs& w, char* smem, int tid) {
    const KernelParams& p = w.p;
    const int warp = tid >> 5, lane = tid & 31;
    const int wg_row0 = (warp / 4) * 64;
    const uint32_t base = smem_address(smem);
    const uint64_t q_desc = sw128_desc(base + Storage::kQ + wg_row0 * 128);
    const uint64_t q8_desc = int8_rows_desc<D>(base + Storage::kQ8 + wg_row0 * D);
    auto k_ring = Storage::k_pipeline(smem);
    auto v_ring = Storage::v_pipeline(smem);
    auto q_ring = Storage::q_pipeline(smem);
    // The warpgroup from a warp-uniform index: from tid, ptxas took the turns' branches for
    // divergent ones (it spilled 400 bytes and serialized the FP8 P V instances' wgmmas, C7520).
    Turns turns{warp_index_uniform() / 4 - 1};
    turns.begin();
    // The producer's tiles (the slot comes with Q), until it marks the end.
    for (;;) {
      q_ring.wait();
      const WorkTileSlot* slot = Storage::work_tile(smem);
      if (slot->end) break;
      const BlockInfo blk = slot->blk;
      const TileRouting routing = slot->routing;
      // Q8 from the landed Q, each warpgroup its rows, where some key tile is INT8-routed: the work
      // tile's 128 rows are one Q scale block, so the codes and scale are quantize_queries'.
      const float q_scale = kRouted && routing.any_int8 ? code_queries(smem, blk.rows, warp / 4, tid) : 0.0f;
      // One work tile, routed or on the FP16 path alone: in the one-product instance a tile with
      // no INT8-routed key tile decodes no route and selects no scale, as flash_fp16 does.
      const auto tile = [&](auto routed) {
        constexpr bool kTileRouted = decltype(routed)::value;
        Softmax softmax;
        softmax.init();
        OutputAccumulator<Cfg, kHalfAccum> o;
        o.zero();
        auto& acc_o = o.wgmma_registers();

        const float q_factor = __fmul_rn(q_scale, p.scale_log2);  // the query tile is one Q scale block
        TileRoutes routes(routing.word, routing.group, 0);
        const int last = Kernel::steps(blk) - 1;
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
        const auto await_k = [&](int n, const KPipeline& at) {
          step.template next<kTileRouted>(routes, blk, n);
          at.wait();
          if (kTileRouted) {
            if (step.int8[0]) k_scale[0] = *Storage::k_scale(smem, at.stage(), 0);
            if (step.int8[1]) k_scale[1] = *Storage::k_scale(smem, at.stage(), 1);
          }
        };
        const auto issue_scores = [&](const KPipeline& at, uint32_t (&lo)[32], uint32_t (&hi)[32]) {
          const uint32_t k_base = base + Storage::k(at.stage()), k8_base = base + Storage::k8(at.stage());
          if constexpr (kUniformSteps) {
            // A missing second half reads a stale stage: scores the mask sets to -inf.
            if (kTileRouted && step.int8[0]) {
              wgmma_scores_s8_n128<D>(lo, hi, q8_desc, int8_rows_desc<D>(k8_base));
            } else {
              wgmma_scores_f16_n128<D>(lo, hi, q_desc, Storage::kQBlockBytes, sw128_desc(k_base), Storage::kBlockBytes);
            }
            return;
          }
          if (kTileRouted && step.int8[0]) {
            wgmma_scores_s8<D>(lo, q8_desc, int8_rows_desc<D>(k8_base));
          } else {
            wgmma_scores_f16<D>(lo, q_desc, Storage::kQBlockBytes, sw128_desc(k_base), Storage::kBlockBytes);
          }
          if (step.halves2) {
            if (kTileRouted && step.int8[1]) {
              wgmma_scores_s8<D>(hi, q8_desc, int8_rows_desc<D>(k8_base + Storage::kK8HalfOffset));
            } else {
              wgmma_scores_f16<D>(hi, q_desc, Storage::kQBlockBytes, sw128_desc(k_base + Storage::kHalfBytes),
                                  Storage::kBlockBytes);
            }
          }
        };
        const auto finish_scores = [&](int n, const KPipeline& at, uint32_t (&lo)[32], uint32_t (&hi)[32], Scores& s) {
          float (&x)[64] = reinterpret_cast<float(&)[64]>(s);
          wgmma_fence_operands(lo);
          wgmma_fence_operands(hi);
          // The scores are in registers: the K stage goes back to the producer.
          release_stage(at, lane);
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
          if (n == last) q_ring.release();
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
        const auto await_v = [&](int n, const VPipeline& at) {
          at.wait();
          if constexpr (kPv != PvPaths::fp8) {
            if (n == last && last_valid < Cfg::kBlockN && !(fp8_group >> (last_valid / kHalfN) & 1u)) {
              zero_v_rows(smem, at.stage(), last_valid, tid);
            }
          }
        };
        // The P V of the step whose P is in `a` (kPvInFlight: in flight under the next step's
        // scores, one commit group), its stage awaited (await_v). kPv fp16: one product into O.
        // kFp8Pv: with pv routed the FP16 halves into O (each waited for where P V is not in
        // flight), then the FP8 group's sums of the first 64 channels (finish_pv folds them and
        // takes the other channels).
        const auto issue_pv = [&](const VPipeline& at) {
          const uint32_t stage = base + Storage::v(at.stage());
          if constexpr (kPv == PvPaths::fp16) {
            wgmma_pv_k128<D>(acc_o, a, sw128_desc_mn(stage, Storage::kBlockBytes));
          } else {
            if constexpr (kPv == PvPaths::routed) {
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                if (!(fp8_group >> h & 1u) && (h == 0 || packed.halves2)) {
                  wgmma_pv_half<D>(acc_o, reinterpret_cast<const uint32_t(&)[4][4]>(a[4 * h]),
                                   sw128_desc_mn(stage + h * Storage::kHalfBytes, Storage::kBlockBytes));
                  if constexpr (!kPvInFlight) {
                    wgmma_commit();
                    wgmma_wait_all();
                    wgmma_fence_operands(acc_o);
                  }
                }
              }
            }
            if (fp8_group) issue_fp8_sums(sums, a, stage, Storage::kHalfBytes, fp8_group, 0);
            wgmma_commit();
          }
        };
        // P V of a step landed: kFp8Pv folds the FP8 group's sums into O, 64 channels at a time,
        // each further block's sums issued once the block before is folded (before the V stage,
        // which holds their scales, goes back to the producer).
        const auto finish_pv = [&](const VPipeline& at) {
          wgmma_fence_operands(acc_o);
          if constexpr (kFp8Pv) {
            if (fp8_group) {
              const float* scales = reinterpret_cast<const float*>(smem + Storage::v_scales(at.stage()));
#pragma unroll
              for (int cb = 0; cb < D / 64; ++cb) {
                if (cb > 0) {
                  issue_fp8_sums(sums, a, base + Storage::v(at.stage()), Storage::kHalfBytes, fp8_group, cb);
                  wgmma_commit();
                  wgmma_wait_all();
                }
                wgmma_fence_operands(sums);
                fold_fp8_sums<D>(acc_o, sums, scales, fp8_g, lane, cb);
              }
            }
          }
          release_stage(at, lane);
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
        } else {
          q_ring.release();
        }
        q_ring.advance();
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

  // Q8 and its scale from the landed Q of a work tile with `rows` query rows: warpgroup `wg` codes
  // its own 64 rows with the scale of all 128 (tid 0..255 over both warpgroups), so neither waits
  // for the other. Not inlined: inlined into the loop's function, the coding made ptxas keep fewer
  // values in registers across the steps (16 bytes spilled, 80 reloaded in the two-product instance).
  __device__ __noinline__ static float code_queries(char* smem, int rows, int wg, int tid) {
    constexpr int kGroupThreads = Cfg::kThreads / Cfg::kConsumerWarpgroups;
    return quantize_resident_half<Cfg::kBlockM, D, kGroupThreads>(
        smem + Storage::kQ, Storage::kQBlockBytes, smem + Storage::kQ8, rows, wg * (Cfg::kBlockM / 2),
        tid % kGroupThreads, Storage::q_scratch(smem) + wg * (kGroupThreads / 32),
        static_cast<unsigned>(NamedBarrierWs::query_codes) + wg);
  }

  // V rows [valid, kBlockN) of a stage to zero: past the sequence end the stage holds another
  // sequence's keys (or TMA's zeros past the tensor), and past the work tile's key tiles keys no
  // row sees, which P = 0 must not multiply into NaN. Every consumer thread has waited for the
  // stage to land; both warpgroups read the whole step, so they meet once the zeros are written.
  __device__ __forceinline__ static void zero_v_rows(char* smem, int stage, int valid, int tid) {
    constexpr int kChunksPerRow = 8;  // 16-byte chunks of a 128-byte row
    const int block_chunks = (Cfg::kBlockN - valid) * kChunksPerRow;
    char* v = smem + Storage::v(stage);
    for (int i = tid; i < block_chunks * Storage::kChannelBlocks; i += Cfg::kThreads) {
      const int block = i / block_chunks, in_block = i % block_chunks;
      const int row = valid + in_block / kChunksPerRow;
      *reinterpret_cast<uint4*>(v + block * Storage::kBlockBytes + row * 128 + (in_block % kChunksPerRow) * 16) =
          make_uint4(0u, 0u, 0u, 0u);
    }
    fence_proxy_async_shared();  // the zeros reach wgmma's operand reads
    named_barrier_sync(static_cast<unsigned>(NamedBarrierWs::zeroed_v_rows), Cfg::kThreads);
  }
};

}  // namespace tilemix::gpu
