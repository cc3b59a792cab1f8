#pragma once
// The K/V streaming loop of the prefill kernels on sm_90a: the same walk, routes, score formulas,
// mask, online softmax and rounding points as MainloopSm80, with the MMAs on wgmma. Two
// warpgroups each own 64 query rows of the 128-row tile; per key tile (64 keys) a warpgroup runs
//   S = Q K^T   (8 x m64n64k16, FP16, both operands from shared memory), or
//   S = Q8 K8^T (4 x m64n64k32, s8 -> s32) for an INT8-routed tile (on_the_fly: Q8 and K8
//       quantized on chip from the resident FP16 tiles, as MainloopSm80 does),
// then the softmax on its registers, then O += P V (4 x m64n128k16, P from the score registers as
// the A operand, V read MN-major). The tiles land by cp.async in the 128-byte swizzle that wgmma
// reads: 64-channel blocks of 128-byte rows (FP16 Q, K and V as two blocks, Q8 and K8 as one).
// One CTA barrier per key tile: the tile has landed, and every warp is done with the stage that
// the next copy overwrites (on_the_fly adds three per quantized tile: onchip_quant.cuh).
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/copy.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/tile_routes.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/prefill/accumulator.cuh"
#include "kernels/prefill/launch.hpp"
#include "kernels/prefill/mask.cuh"
#include "kernels/prefill/onchip_quant.cuh"
#include "kernels/prefill/params.cuh"
#include "kernels/prefill/softmax.cuh"
#include "kernels/prefill/tile_scheduler.cuh"

namespace tilemix::gpu {

// [Q: two blocks of 128 rows][Q8: 128 rows, routed only][stage s: K or K8 | V] x 2, 1024-byte
// aligned (the swizzle's address bits). The epilogue stages O over Q. Two routed CTAs take the
// whole 228 KB of a multiprocessor, so the per-warp floats of the on-chip quantization
// (on_the_fly) live in the alignment slack: before the aligned base when it moved by at least
// that much, else after the layout's end (one of the two holds at least 512 bytes).
template <class Cfg, bool kRouted>
struct PrefillSmemSm90 {
  static constexpr int kChannelBlocks = Cfg::kHeadDim / 64;  // 64 FP16 channels per 128-byte row
  template <int kRows>
  using Block = SwizzledTile<kRows, 128>;  // = wgmma's K-major 128-byte swizzle
  static constexpr int kQBlockBytes = Block<Cfg::kBlockM>::kBytes;
  static constexpr int kKBlockBytes = Block<Cfg::kBlockN>::kBytes;
  static constexpr int kStages = 2;
  static constexpr int kQ = 0;
  static constexpr int kQ8 = kQ + kChannelBlocks * kQBlockBytes;
  static constexpr int kFirstStage = kQ8 + (kRouted ? kQBlockBytes : 0);
  static constexpr int kKBytes = kChannelBlocks * kKBlockBytes;
  static constexpr int kStageBytes = 2 * kKBytes;
  static constexpr int kBytes = kFirstStage + kStages * kStageBytes;
  static constexpr int kAllocBytes = kBytes + 1024;  // the base is aligned at run time
  static_assert(Cfg::kHeadDim == 128, "Q8 and K8 rows are one 128-byte block");
  static_assert(kQBlockBytes % 1024 == 0 && kKBlockBytes % 1024 == 0, "blocks keep the 1024-byte alignment");

  static constexpr int kScratchBytes = 4 * Cfg::kWarps;
  __device__ __forceinline__ static char* align(char* raw) {
    const uint32_t misalign = smem_address(raw) & 1023u;
    return raw + ((1024u - misalign) & 1023u);
  }
  __device__ __forceinline__ static float* scratch(char* raw, char* base) {
    return reinterpret_cast<float*>(base - raw >= kScratchBytes ? base - kScratchBytes : base + kBytes);
  }
  __device__ __forceinline__ static int k(int stage) { return kFirstStage + stage * kStageBytes; }
  __device__ __forceinline__ static int v(int stage) { return k(stage) + kKBytes; }
};

template <class Cfg, ScorePaths kPaths>
struct MainloopSm90 {
  static constexpr bool kRouted = kPaths != ScorePaths::fp16;
  static constexpr bool kOnTheFly = kPaths == ScorePaths::routed_on_the_fly;
  static constexpr const char* kLaunchName = "launch of prefill_kernel (wgmma mainloop)";
  using Smem = PrefillSmemSm90<Cfg, kRouted>;
  using Softmax = OnlineSoftmax<Cfg::kRowSlices, Cfg::kKeyFrags>;
  using Scores = float[Cfg::kRowSlices][Cfg::kKeyFrags][4];
  static constexpr int kThreads = Cfg::kThreads;
  template <int kRows>
  using BlockedTile = ChannelBlockedTile<kRows, Smem::kChannelBlocks>;  // FP16 Q, K and V

  // A [rows x 2d bytes] FP16 tile (row_stride bytes apart in global memory) into its channel
  // blocks; rows from `valid` on are zero-filled.
  template <int kRows>
  __device__ __forceinline__ static void load_fp16(uint32_t dst, const void* src, int64_t row_stride, int valid,
                                                   int tid) {
#pragma unroll
    for (int blk = 0; blk < Smem::kChannelBlocks; ++blk) {
      load_tile_async<typename Smem::template Block<kRows>, kThreads>(
          dst + blk * Smem::template Block<kRows>::kBytes, static_cast<const char*>(src) + 128 * blk, row_stride,
          valid, tid);
    }
  }

  template <class Acc>
  __device__ __forceinline__ static void run(const KernelParams& p, const BlockInfo& blk, char* smem, Softmax& softmax,
                                             Acc& o) {
    static_assert(std::is_same_v<Acc, OutputAccumulator<Cfg, false>>, "O is the fp32 wgmma accumulator");
    constexpr int D = Cfg::kHeadDim;
    extern __shared__ char smem_window[];  // the dynamic shared memory before alignment
    float* scratch = Smem::scratch(smem_window, smem);
    const int tid = threadIdx.x, warp = tid >> 5;
    const int wg_row0 = (warp / 4) * 64;  // this warpgroup's first row of the tile
    const uint32_t base = smem_address(smem);

    const int64_t q_first = blk.q_first<Cfg::kBlockM>(p, D), k_first = blk.k_first(p, D);

    TileRouting routing;
    routing.template load<kRouted>(p, blk);
    TileRoutes routes(routing.word, routing.group, 0);

    // Key tile n into `stage`: K8 (quantize_once, INT8 route) or K, and V, as one copy group. Its
    // route and K scale wait in next_int8 / next_k_scale for the iteration that computes it.
    bool next_int8 = false;
    float next_k_scale = 0.0f;
    const auto issue_key_tile = [&](int n, int stage) {
      const int64_t first = k_first + static_cast<int64_t>(n) * Cfg::kBlockN * p.hk * D;
      const int valid = min(Cfg::kBlockN, blk.lk - n * Cfg::kBlockN);
      next_int8 = kRouted && routes.next();
      if (kPaths == ScorePaths::routed_quantize_once && next_int8) {
        load_tile_async<typename Smem::template Block<Cfg::kBlockN>, kThreads>(
            base + Smem::k(stage), reinterpret_cast<const char*>(p.k8 + first), p.k8_row_bytes, valid, tid);
        next_k_scale = p.k_scale[(p.k_block_offset[blk.b] + n) * p.hk + blk.kv_head];
      } else {
        load_fp16<Cfg::kBlockN>(base + Smem::k(stage), p.k + first, p.kv_row_bytes, valid, tid);
      }
      load_fp16<Cfg::kBlockN>(base + Smem::v(stage), p.v + first, p.kv_row_bytes, valid, tid);
      cp_async_commit();
    };

    // Prologue: Q (and Q8 when some tile is INT8) and key tile 0.
    load_fp16<Cfg::kBlockM>(base + Smem::kQ, p.q + q_first, p.q_row_bytes, blk.rows, tid);
    if (kPaths == ScorePaths::routed_quantize_once && routing.any_int8) {
      load_tile_async<typename Smem::template Block<Cfg::kBlockM>, kThreads>(
          base + Smem::kQ8, reinterpret_cast<const char*>(p.q8 + q_first), p.q8_row_bytes, blk.rows, tid);
    }
    cp_async_commit();
    if (blk.key_tiles > 0) issue_key_tile(0, 0);

    // Per-CTA INT8 factor scale_q * scale_log2 (the query tile is one Q scale block).
    float q_factor = 0.0f;
    if (kRouted && routing.any_int8) {
      float q_scale;
      if constexpr (kOnTheFly) {
        cp_async_wait<1>();  // Q landed (key tile 0 may still be in flight)
        __syncthreads();
        q_scale = quantize_resident_tile<Cfg::kBlockM, D, kThreads, false, BlockedTile<Cfg::kBlockM>, true>(
            smem + Smem::kQ, smem + Smem::kQ8, scratch, tid);
      } else {
        q_scale = p.q_scale[(p.q_block_offset[blk.b] + blk.m) * p.hq + blk.h];
      }
      q_factor = __fmul_rn(q_scale, p.scale_log2);
    }

    // This warpgroup's rows of Q and Q8 as wgmma A operands (k steps advance the start address).
    const uint64_t q_desc = sw128_desc(base + Smem::kQ + wg_row0 * 128);
    const uint64_t q8_desc = sw128_desc(base + Smem::kQ8 + wg_row0 * 128);
    float (&acc_o)[4 * Cfg::kDimFrags] = reinterpret_cast<float(&)[4 * Cfg::kDimFrags]>(o.c);

    for (int n = 0; n < blk.key_tiles; ++n) {
      const int stage = n & 1;
      const bool int8_tile = next_int8;
      const float k_scale = next_k_scale;
      // Tile n (and Q) landed and is visible to wgmma; every warp is done with tile n - 1.
      cp_async_wait<0>();
      fence_proxy_async_shared();
      __syncthreads();
      if (n + 1 < blk.key_tiles) issue_key_tile(n + 1, stage ^ 1);

      Scores s;
      float (&x)[32] = reinterpret_cast<float(&)[32]>(s);
      const uint64_t k_desc = sw128_desc(base + Smem::k(stage));
      if (kRouted && int8_tile) {
        float tile_k_scale = k_scale;
        if constexpr (kOnTheFly) {  // K8 over its own FP16 tile
          tile_k_scale = quantize_resident_tile<Cfg::kBlockN, D, kThreads, true, BlockedTile<Cfg::kBlockN>, true>(
              smem + Smem::k(stage), smem + Smem::k(stage), scratch, tid);
        }
        int acc[32];
        wgmma_scores_s8<128>(acc, q8_desc, k_desc);
        wgmma_wait_all();
        wgmma_fence_operands(acc);
        // s = fp32(C) * ((scale_q * scale_log2) * scale_k), as MainloopSm80.
        const float factor = __fmul_rn(q_factor, tile_k_scale);
#pragma unroll
        for (int i = 0; i < 32; ++i) x[i] = __fmul_rn(int8_dot_to_float(acc[i]), factor);
      } else {
        wgmma_scores_f16<128>(x, q_desc, Smem::kQBlockBytes, k_desc, Smem::kKBlockBytes);
        wgmma_wait_all();
        wgmma_fence_operands(x);
#pragma unroll
        for (int i = 0; i < 32; ++i) x[i] = __fmul_rn(x[i], p.scale_log2);
      }
      if (TileMask<Cfg>::needed(blk, n, p.causal)) TileMask<Cfg>::apply(s, blk, n, p.causal, warp, tid & 31);

      float alpha[Softmax::kRows];
      softmax.update(s, p.fp16_state, alpha);
      if (Softmax::any_moved(alpha)) o.rescale(alpha);

      // O += fp16(P) V: the k16 step kk covers keys 16 kk .. 16 kk + 15, score fragments 2 kk and
      // 2 kk + 1, which are the A fragment of that step.
      uint32_t a[Cfg::kBlockN / 16][4];
#pragma unroll
      for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk) {
        a[kk][0] = pack_half2(s[0][2 * kk][0], s[0][2 * kk][1]);
        a[kk][1] = pack_half2(s[0][2 * kk][2], s[0][2 * kk][3]);
        a[kk][2] = pack_half2(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
        a[kk][3] = pack_half2(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
      }
      const uint64_t v_desc = sw128_desc_mn(base + Smem::v(stage), Smem::kKBlockBytes);
      wgmma_pv_k64(acc_o, a, v_desc);
      wgmma_wait_all();
      wgmma_fence_operands(acc_o);
      if (p.fp16_state) o.round_to_half_state();
    }
  }
};

}  // namespace tilemix::gpu
