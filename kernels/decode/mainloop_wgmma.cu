// The warpgroup (wgmma) decode kernel over the INT8 cache, for CTAs of up to 64 query rows at
// d = 128 (chosen by `mainloop: auto` for 33-64 rows: GQA 4 with 9 to 16 new tokens). Same CTA
// work, same split plan, same numerics as mainloop_mma_sync.cuh; what differs is the MMA: one
// warpgroup computes the 64 x 64 score tile and the 64 x 128 output with wgmma, instead of every
// warp converting and multiplying the whole key tile with mma.sync (at 16 new tokens the
// mma.sync kernel spends its time on four copies of the conversions and on 512 m16n8k16 per
// tile; docs/perf/decode.md).
//
// Query rows r = token r / heads of head r % heads, padded with zero rows to 64. Per key tile:
//   1. wait for the tile, barrier (cp.async, the K8 and V8 tiles land K-major with the 128-byte
//      swizzle, which is wgmma's operand layout; the prologue fills every stage);
//   2. S = Q8 K8^T (wgmma s8, x = float(C), f = (q_scale * scale_log2) * k_scale) or, K8
//      converted into FP16 K over the tile's own stage first, S = Q K^T on the FP16 codes
//      (x = acc, f = k_scale * scale_log2); s = x * f. Each route is its own straight-line
//      instance of the tile step;
//   3. V8 converted once into FP16 V (two K-major 64-channel blocks, which the P V product reads
//      MN-major): codes loaded under the score MMA, stored beside the softmax (INT8 route) or
//      under the FP16 score MMA;
//   4. no score past the sequence or the causal limit; row maxima of x within the quad of lanes
//      that holds a row, times f; the reference m moves where the maximum passes it by more than
//      kDecodeRescaleLog2; p = exp2(fma(x, f, -m)); O rescaled, per half of the warp's rows,
//      where a reference of that half moved;
//   5. O += P V: P times the V block scale (in the exponent of p) rounded to FP16, straight from
//      the score registers; under it the tile kStages ahead is issued into the stage this one
//      leaves.
// The kernel is compiled per DecodeRoutes (what the call's routing words hold). mixed is as
// above. all_int8 holds Q8 as the score MMA's register A operand (64 KB of shared-memory traffic
// per tile instead of 72). all_fp16 holds Q so instead, converts K8 and V8 into FP16 buffers of
// their own (K where FP16 Q would be) before one barrier, issues the next tile into the stage
// right after it and needs no barrier before P V: two CTA barriers per tile instead of four,
// 96 KB of shared-memory traffic instead of 112 (decode v29).
// Epilogue: o = fp16(O / l) and LSE, or (m, l, O) of a split for the combine kernel.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/decode/decode_shape.hpp"
#include "kernels/common/check.cuh"
#include "kernels/common/copy.cuh"
#include "kernels/common/dependent_launch.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/common/tile_routes.cuh"
#include "kernels/decode/code_conversion.cuh"
#include "kernels/decode/config.hpp"
#include "kernels/decode/cta_work.cuh"
#include "kernels/decode/epilogue.cuh"
#include "kernels/decode/launch.hpp"
#include "kernels/decode/params.cuh"
#include "kernels/decode/softmax.cuh"
#include "kernels/decode/tile_loader.cuh"
#include "kernels/decode/timeline.cuh"
#include "kernels/quant/int8_codes.cuh"

namespace tilemix::gpu {
namespace {

// Shared memory of the wgmma kernel, every operand 1024-byte aligned:
// [stage s: K8 | V8, or after the conversions K in FP16 (two 64-channel blocks)] x kStages |
// Q (FP16, two blocks; in the all-FP16 instance FP16 K) | Q8 | V (FP16, two blocks) |
// scales [kStages][2] | per-head |Q| maxima [64]. 72 KB: three CTAs per multiprocessor.
struct DecodeWgmmaSmem {
  using Tile = SwizzledTile<kDecodeBlockN, kDecodeWgmmaDim>;  // 64 keys x 128 codes
  static constexpr int kStages = kDecodeWgmmaStages;
  static constexpr int kTileBytes = Tile::kBytes;            // 8 KB
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kHalfBlock = 64 * 128;                // 64 rows x 64 FP16 channels
  static constexpr int kQ16 = kStages * kStageBytes;
  static constexpr int kK16 = kQ16;  // the all-FP16 instance: Q is in registers, FP16 K goes here
  static constexpr int kQ8 = kQ16 + 2 * kHalfBlock;
  static constexpr int kV16 = kQ8 + kDecodeWgmmaRows * 128;
  static constexpr int kScales = kV16 + 2 * kHalfBlock;
  static constexpr int kHeadAbsmax = kScales + 64;
  static constexpr int kBytes = kHeadAbsmax + kDecodeWgmmaRows * 4;
  static constexpr int kAllocBytes = kBytes + 1024;  // the base is aligned at run time
  static_assert(kStageBytes == 2 * kHalfBlock, "an FP16 K tile fits its stage");
  static_assert(kStageBytes % 1024 == 0 && kQ16 % 1024 == 0 && kQ8 % 1024 == 0 && kV16 % 1024 == 0,
                "wgmma operands are 1024-byte aligned");
  static_assert(kStages * 8 <= 64, "scales fit their slot");

  __device__ __forceinline__ static char* align(char* raw) {
    const uint32_t misalign = smem_address(raw) & 1023u;
    return raw + ((1024u - misalign) & 1023u);
  }
};

// A 64-key x 128-code tile (K-major, 128-byte swizzle) as items (key, 16-code chunk): item
// tid + 128 i of a thread is key tid % 64, chunk tid / 64 + 2 i. The 8 threads of a 16-byte
// shared-memory phase hold 8 consecutive keys of one chunk, which the swizzle puts in 8 distinct
// bank groups, both for the code loads and for the FP16 stores below.
constexpr int kCodeItems = kDecodeBlockN * (kDecodeWgmmaDim / 16) / 128;

__device__ __forceinline__ void load_code_items(const char* codes, int tid, uint4 (&items)[kCodeItems]) {
#pragma unroll
  for (int i = 0; i < kCodeItems; ++i) {
    items[i] = *reinterpret_cast<const uint4*>(codes + sw128_offset(tid % 64, 16 * (tid / 64 + 2 * i)));
  }
}

// The items as FP16 (codes are exact) into two 64-channel blocks of 64 keys x 128 bytes with the
// 128-byte swizzle: the K-major B operand of Q K^T and the MN-major B operand of P V alike.
__device__ __forceinline__ void store_half_items(char* halves, int tid, const uint4 (&items)[kCodeItems]) {
#pragma unroll
  for (int i = 0; i < kCodeItems; ++i) {
    const int key = tid % 64, chunk = tid / 64 + 2 * i;
    const uint32_t w[4] = {bias_codes(items[i].x), bias_codes(items[i].y), bias_codes(items[i].z),
                           bias_codes(items[i].w)};
    char* block = halves + (chunk / 4) * DecodeWgmmaSmem::kHalfBlock;
    *reinterpret_cast<uint4*>(block + sw128_offset(key, (chunk % 4) * 32)) =
        make_uint4(codes_to_half2(w[0], kBytes01), codes_to_half2(w[0], kBytes23), codes_to_half2(w[1], kBytes01),
                   codes_to_half2(w[1], kBytes23));
    *reinterpret_cast<uint4*>(block + sw128_offset(key, (chunk % 4) * 32 + 16)) =
        make_uint4(codes_to_half2(w[2], kBytes01), codes_to_half2(w[2], kBytes23), codes_to_half2(w[3], kBytes01),
                   codes_to_half2(w[3], kBytes23));
  }
}

// The register A fragments of a 64-row operand stored as 128-byte-swizzled K-major blocks of
// 128-byte rows (64-channel blocks `kHalfBlock` apart): frag[kk] covers bytes 32 kk .. 32 kk + 31
// of every row, i.e. a k16 step of FP16 or a k32 step of INT8 codes, for the warp's 16 rows.
template <int kSteps>
__device__ __forceinline__ void load_a_fragments(uint32_t (&frag)[kSteps][4], uint32_t tile, int warp, int lane) {
  const int m = lane >> 3, row = 16 * warp + (m & 1) * 8 + (lane & 7);
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
    const uint32_t block = tile + (kk / 4) * DecodeWgmmaSmem::kHalfBlock;
    ldmatrix_x4(frag[kk], block + sw128_offset(row, 32 * (kk % 4) + 16 * (m >> 1)));
  }
}

template <DecodeRoutes kRoutes>
__global__ void __launch_bounds__(128, kDecodeWgmmaCtasPerSm)
    decode_wgmma_kernel(const __grid_constant__ DecodeKernelParams p) {
  using Smem = DecodeWgmmaSmem;
  using Tile = Smem::Tile;
  constexpr int D = kDecodeWgmmaDim, kStages = Smem::kStages, kThreads = 128;
  allow_dependent_launch();
  stamp_timeline(p, kTimelineStart);
  extern __shared__ __align__(1024) char smem_raw[];
  char* smem = Smem::align(smem_raw);
  const uint32_t base = smem_address(smem);

  DecodeBlock blk;
  blk.init(p);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;

  DecodeTileLoader<Tile, kThreads, true> tiles(p, blk, tid);
  const auto issue = [&](int stage) {
    const uint32_t k_dst = base + stage * Smem::kStageBytes;
    tiles.issue_next(k_dst, k_dst + Smem::kTileBytes, base + Smem::kScales + stage * 8);
  };
  // The routing word and Q are requested before the cache tiles, which would delay them by the
  // time every CTA's first tiles take to arrive (the mma.sync kernel says more).
  const uint64_t word = p.words[static_cast<int64_t>(blk.kv_head) * p.batch + blk.b];
  const int group = p.group[blk.b];
  // Q into shared memory: item (row, 16-channel chunk) tid + 128 i, rows past the CTA's rows
  // zero. All of a thread's loads are issued before the first store, and the values stay in
  // registers for the Q8 pass.
  constexpr int kQItems = kDecodeWgmmaRows * (D / 16) / kThreads;
  uint4 q_lo[kQItems], q_hi[kQItems];
#pragma unroll
  for (int i = 0; i < kQItems; ++i) {
    const int item = tid + i * kThreads, r = item / (D / 16), chunk = item % (D / 16);
    q_lo[i] = q_hi[i] = make_uint4(0u, 0u, 0u, 0u);
    if (r < blk.rows) {
      const __half* row = p.q + (blk.token(p, r) * p.hq + blk.head(r)) * D + 16 * chunk;
      q_lo[i] = *reinterpret_cast<const uint4*>(row);
      q_hi[i] = *reinterpret_cast<const uint4*>(row + 8);
    }
  }

#pragma unroll
  for (int i = 0; i < kStages; ++i) {
    if (blk.tile_begin + i < blk.tile_end) issue(i);
    cp_async_commit();
  }
  if constexpr (kRoutes != DecodeRoutes::mixed) {
    // A tile of the other route would be computed on the wrong path: fail instead.
    const bool int8_claimed = kRoutes == DecodeRoutes::all_int8;
    if (any_int8_tile(int8_claimed ? ~word : word, group, blk.tile_begin, blk.tile_end)) __trap();
  }
  const bool needs_q8 = kRoutes == DecodeRoutes::all_int8 ||
                        (kRoutes == DecodeRoutes::mixed && any_int8_tile(word, group, blk.tile_begin, blk.tile_end));
  TileRoutes routes(word, group, blk.tile_begin);
  unsigned* head_absmax = reinterpret_cast<unsigned*>(smem + Smem::kHeadAbsmax);
  if (tid < kDecodeWgmmaRows) head_absmax[tid] = 0u;
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kQItems; ++i) {
    const int item = tid + i * kThreads, r = item / (D / 16), chunk = item % (D / 16);
    // FP16 Q, for the FP16 route (the all-FP16 instance loads its fragments from here).
    if constexpr (kRoutes != DecodeRoutes::all_int8) {
      char* q16 = smem + Smem::kQ16 + (chunk / 4) * Smem::kHalfBlock;
      *reinterpret_cast<uint4*>(q16 + sw128_offset(r, (chunk % 4) * 32)) = q_lo[i];
      *reinterpret_cast<uint4*>(q16 + sw128_offset(r, (chunk % 4) * 32 + 16)) = q_hi[i];
    }
    // Non-negative floats order like their bit patterns.
    if (needs_q8 && r < blk.rows) {
      atomicMax(&head_absmax[r % blk.heads], __float_as_uint(absmax8(q_hi[i], absmax8(q_lo[i], 0.0f))));
    }
  }
  // Q8 per (sequence, head) over all the head's rows, as quantize_blockwise with BLKQ = 128.
  float q_factor[2] = {0.0f, 0.0f};
  if (needs_q8) {
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kQItems; ++i) {
      const int item = tid + i * kThreads, r = item / (D / 16), chunk = item % (D / 16);
      const Int8Encoder encoder(int8_block_scale(__uint_as_float(head_absmax[r % blk.heads])));
      const uint2 a = encoder.encode8(q_lo[i]), b = encoder.encode8(q_hi[i]);
      *reinterpret_cast<uint4*>(smem + Smem::kQ8 + sw128_offset(r, 16 * chunk)) = make_uint4(a.x, a.y, b.x, b.y);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = 16 * warp + g + 8 * i;
      q_factor[i] = __fmul_rn(int8_block_scale(__uint_as_float(head_absmax[r % blk.heads])), p.scale_log2);
    }
  }

  // The all-FP16 instance holds Q as wgmma A fragments (q_frag[kk]: channels 16 kk .. 16 kk + 15
  // of the warp's 16 rows) and converts each tile's K8 into a K buffer where FP16 Q was; the
  // all-INT8 instance holds Q8 so (q8_frag[kk]: channels 32 kk .. 32 kk + 31).
  constexpr bool kQInRegisters = kRoutes == DecodeRoutes::all_fp16;
  constexpr bool kQ8InRegisters = kRoutes == DecodeRoutes::all_int8;
  uint32_t q_frag[kQInRegisters ? 8 : 1][4];
  uint32_t q8_frag[kQ8InRegisters ? 4 : 1][4];
  if constexpr (kQInRegisters || kQ8InRegisters) {
    __syncthreads();
    if constexpr (kQInRegisters) load_a_fragments(q_frag, base + Smem::kQ16, warp, lane);
    if constexpr (kQ8InRegisters) load_a_fragments(q8_frag, base + Smem::kQ8, warp, lane);
  }

  const int rows_of_thread[2] = {16 * warp + g, 16 * warp + g + 8};
  const int visible[2] = {blk.visible(rows_of_thread[0]), blk.visible(rows_of_thread[1])};
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.0f;
  const int mask_from = blk.len - blk.n + 1;

  stamp_timeline(p, kTimelineLoopStart);
  int stage = 0;
  for (int t = blk.tile_begin; t < blk.tile_end; ++t) {
    cp_async_wait<kStages - 1>();
    // The landed K8 tile (and Q, K, V writes) reach wgmma's reads. No wgmma of the all-FP16
    // instance reads a stage, and it fences its FP16 K and V writes before their barrier.
    if constexpr (!kQInRegisters) fence_proxy_async_shared();
    __syncthreads();

    // Every descriptor from the shared base each tile: the base goes through an empty asm, so
    // that they are not kept live across the loop (registers, decode v28).
    uint32_t tile_base = base;
    asm volatile("" : "+r"(tile_base));
    const uint64_t k_desc = sw128_desc(tile_base + stage * Smem::kStageBytes);
    const uint64_t q8_desc = sw128_desc(tile_base + Smem::kQ8), q16_desc = sw128_desc(tile_base + Smem::kQ16);
    const uint64_t v_desc = sw128_desc_mn(tile_base + Smem::kV16, Smem::kHalfBlock);
    const char* k8_ptr = smem + stage * Smem::kStageBytes;
    const char* v8_ptr = k8_ptr + Smem::kTileBytes;
    const float* scales = reinterpret_cast<const float*>(smem + Smem::kScales + stage * 8);
    // One tile on either route, each instance a straight line for the scheduler.
    const auto tile_step = [&](auto int8_tag) {
      constexpr bool kInt8Route = decltype(int8_tag)::value;
      // Raw scores x of S = Q K^T (element 4j + e: row rows_of_thread[e / 2], key 8j + 2 tq + e % 2
      // of the tile) and each row's factor f into the log2 domain, s = x * f: INT8 route x = float(C),
      // f = (q_scale * scale_log2) * k_scale; FP16 route x = the fp32 dot, f = k_scale * scale_log2.
      // f goes through nonzero_factor, so that -inf (an illegal key) stays -inf in the fma below.
      // V8 codes are loaded into registers early and stored as FP16 V later: on the INT8 route
      // loaded under Q8 K8^T and stored beside the softmax (independent work that fills its
      // latencies); on the mixed instance's FP16 route loaded with the K8 codes before FP16 K
      // overwrites the stage and stored under Q K^T. One barrier before P V covers both. The
      // all-FP16 instance converts V before Q K^T and reissues the stage then.
      constexpr bool kVWrittenEarly = kQInRegisters && !kInt8Route;
      float x[32], f[2], log2_v_scale;
      uint4 v_codes[kCodeItems];
      if constexpr (kInt8Route) {
        int acc[32];
        if constexpr (kQ8InRegisters) {
          wgmma_scores_s8_d128_rs(acc, q8_frag, k_desc);
        } else {
          wgmma_scores_s8<128>(acc, q8_desc, k_desc);
        }
        load_code_items(v8_ptr, tid, v_codes);
        wgmma_wait_all();
        wgmma_fence_operands(acc);
#pragma unroll
        for (int i = 0; i < 32; ++i) x[i] = __int2float_rn(acc[i]);
        f[0] = nonzero_factor(__fmul_rn(q_factor[0], scales[0]));
        f[1] = nonzero_factor(__fmul_rn(q_factor[1], scales[0]));
      } else if constexpr (kQInRegisters) {
        // K and V into their FP16 buffers, one barrier, then the stage is free and Q K^T runs.
        uint4 k_codes[kCodeItems];
        load_code_items(k8_ptr, tid, k_codes);
        load_code_items(v8_ptr, tid, v_codes);
        store_half_items(smem + Smem::kK16, tid, k_codes);
        store_half_items(smem + Smem::kV16, tid, v_codes);
        // The stage's scales too are read before the barrier that lets the next tile into it.
        f[0] = f[1] = nonzero_factor(__fmul_rn(scales[0], p.scale_log2));
        log2_v_scale = v_scale_exponent(scales[1]);
        fence_proxy_async_shared();
        __syncthreads();
        if (t + kStages < blk.tile_end) issue(stage);
        cp_async_commit();
        wgmma_scores_f16_d128_rs(x, q_frag, sw128_desc(tile_base + Smem::kK16), Smem::kHalfBlock);
        wgmma_wait_all();
        wgmma_fence_operands(x);
      } else {
        uint4 k_codes[kCodeItems];
        load_code_items(k8_ptr, tid, k_codes);
        load_code_items(v8_ptr, tid, v_codes);
        __syncthreads();  // every thread holds its K8 and V8 codes: FP16 K may overwrite the stage
        store_half_items(smem + stage * Smem::kStageBytes, tid, k_codes);
        fence_proxy_async_shared();
        __syncthreads();
        wgmma_scores_f16<128>(x, q16_desc, Smem::kHalfBlock, k_desc, Smem::kHalfBlock);
        store_half_items(smem + Smem::kV16, tid, v_codes);
        wgmma_wait_all();
        wgmma_fence_operands(x);
        f[0] = f[1] = nonzero_factor(__fmul_rn(scales[0], p.scale_log2));
      }
      // Keys past the sequence or the causal limit (only the last tiles have any): x = -inf, p = 0.
      if ((t + 1) * kDecodeBlockN > mask_from) {
#pragma unroll
        for (int i = 0; i < 32; ++i) {
          const int key = t * kDecodeBlockN + 8 * (i >> 2) + 2 * tq + (i & 1);
          if (key >= visible[(i >> 1) & 1]) x[i] = -INFINITY;
        }
      }
      if constexpr (kInt8Route) store_half_items(smem + Smem::kV16, tid, v_codes);  // beside the softmax

      // Online softmax; a row's 64 keys lie in the 4 lanes of its quad, 16 per lane (8 blocks of 2).
      // f > 0 and rounding is monotone, so the tile maximum of s is the maximum of x times f, and
      // p = exp2(fma(x, f, -ref)) needs no s. Both rows go through each step together, the maxima
      // as trees, so that the dependent chains are short and interleave.
      float x_max[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float m[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) m[j] = fmaxf(x[4 * j + 2 * h], x[4 * j + 2 * h + 1]);
        x_max[h] = tree_reduce(m, [](float a, float b) { return fmaxf(a, b); });
      }
#pragma unroll
      for (int lanes = 1; lanes <= 2; lanes *= 2) {
        const float other[2] = {__shfl_xor_sync(0xffffffffu, x_max[0], lanes),
                                __shfl_xor_sync(0xffffffffu, x_max[1], lanes)};
        x_max[0] = fmaxf(x_max[0], other[0]);
        x_max[1] = fmaxf(x_max[1], other[1]);
      }
      // The V block scale enters the exponent: x becomes p * v_scale, the P V operand before its
      // FP16 rounding, with no multiply per score; the row sums take 1 / v_scale back per tile.
      if constexpr (!kVWrittenEarly) log2_v_scale = v_scale_exponent(scales[1]);
      float alpha[2], exponent_shift[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float ref = move_reference(row_max[h], __fmul_rn(x_max[h], f[h]), alpha[h]);
        exponent_shift[h] = __fsub_rn(log2_v_scale, ref);
      }
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        x[i] = exp2_approx(__fmaf_rn(x[i], f[(i >> 1) & 1], exponent_shift[(i >> 1) & 1]));
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) sum = __fadd_rn(__fadd_rn(sum, x[4 * j + 2 * h]), x[4 * j + 2 * h + 1]);
        row_sum[h] = __fadd_rn(__fmul_rn(row_sum[h], alpha[h]), __fmul_rn(sum, exp2_approx(-log2_v_scale)));
      }
      // O *= alpha for each half of the warp's rows (rows g and rows g + 8) on its own, skipped
      // where no row of the half moved its reference (alpha = 1 leaves O unchanged): a reference
      // moves only when a tile's maximum passes it by more than kDecodeRescaleLog2, which after
      // a row's first tile is rare.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (__any_sync(0xffffffffu, alpha[h] != 1.0f)) {
#pragma unroll
          for (int j = 0; j < 16; ++j) {
            o[4 * j + 2 * h] = __fmul_rn(o[4 * j + 2 * h], alpha[h]);
            o[4 * j + 2 * h + 1] = __fmul_rn(o[4 * j + 2 * h + 1], alpha[h]);
          }
        }
      }

      // O += P V: the k16 step kk covers keys 16 kk .. 16 kk + 15, i.e. score blocks 2 kk and
      // 2 kk + 1, which are exactly the A fragment of that step; V is read MN-major.
      uint32_t a[4][4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const float* blk_s = x + 4 * (2 * kk + half);
          a[kk][2 * half] = pack_half2(blk_s[0], blk_s[1]);
          a[kk][2 * half + 1] = pack_half2(blk_s[2], blk_s[3]);
        }
      }
      if constexpr (!kVWrittenEarly) {
        fence_proxy_async_shared();  // P V reads every thread's V
        __syncthreads();
      }
      wgmma_pv_k64(o, a, v_desc);
      if constexpr (!kVWrittenEarly) {
        // Past that barrier no thread reads this stage again: the tile kStages ahead goes into it
        // under P V, half an iteration earlier than at the top of the next one.
        if (t + kStages < blk.tile_end) issue(stage);
        cp_async_commit();
      }
      wgmma_wait_all();
      wgmma_fence_operands(o);
    };
    if constexpr (kRoutes == DecodeRoutes::all_int8) {
      tile_step(std::true_type{});
    } else if constexpr (kRoutes == DecodeRoutes::all_fp16) {
      tile_step(std::false_type{});
    } else if (routes.next()) {
      tile_step(std::true_type{});
    } else {
      tile_step(std::false_type{});
    }
    stage = stage + 1 == kStages ? 0 : stage + 1;
  }
  cp_async_wait<0>();
  stamp_timeline(p, kTimelineLoopEnd);

  wgmma_epilogue(p, blk, o, row_max, row_sum, rows_of_thread, tq, tid);
  finish_timeline(p, blk, true);
}

}  // namespace

void launch_decode_wgmma(const DecodeKernelParams& p, DecodeRoutes routes, int64_t total_splits, void* stream,
                         const std::string& context) {
  constexpr int kSmemBytes = DecodeWgmmaSmem::kAllocBytes;
  const auto kernel = routes == DecodeRoutes::all_int8   ? decode_wgmma_kernel<DecodeRoutes::all_int8>
                      : routes == DecodeRoutes::all_fp16 ? decode_wgmma_kernel<DecodeRoutes::all_fp16>
                                                         : decode_wgmma_kernel<DecodeRoutes::mixed>;
  TILEMIX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes), context);
  TILEMIX_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared),
      context);
  const dim3 grid(static_cast<unsigned>(total_splits * p.hk * p.head_chunks));
  kernel<<<grid, 128, kSmemBytes, static_cast<cudaStream_t>(stream)>>>(p);
  TILEMIX_LAUNCH_CHECK("decode_wgmma_kernel", context + " routes=" + to_string(routes) + " grid=" +
                                                  std::to_string(grid.x) + " smem=" + std::to_string(kSmemBytes));
}

}  // namespace tilemix::gpu
