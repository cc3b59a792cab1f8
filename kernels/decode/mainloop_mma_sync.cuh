#pragma once
// The mma.sync split-K decode kernel: one CTA per (split of a sequence's key tiles, KV head, head chunk).
// Its query tile holds every new token of the sequence for every query head of the KV head (rows
// r = token r / heads of head r % heads), so each KV head's cache is streamed once per call.
//
// Per key tile (64 tokens = one scale block), in ascending order as the emulator walks them:
//   1. wait for the tile, barrier, issue the tile kStages - 1 ahead (cp.async, 16-byte chunks);
//   2. raw scores x of S^T = K Q^T for the warp's keys and a factor f per query column, s = x * f:
//      INT8 cache, INT8 route: mma.m16n8k32 on K8 and Q8 (Q quantized on chip once per CTA),
//      x = float(C), f = (q_scale * scale_log2) * k_scale; INT8 cache, FP16 route: K8 converted
//      to FP16 in registers, mma.m16n8k16, x = acc, f = k_scale * scale_log2; FP16 cache:
//      mma.m16n8k16 on K, x = acc, f = scale_log2;
//   3. no score for keys past the sequence or the causal limit (only the last tiles);
//   4. the tile's row maxima of x times f (one exchange through shared memory when warps split
//      the keys), the reference m moved where the maximum passes it by more than
//      kDecodeRescaleLog2, p = exp2(fma(x, f, -m)) in fp32, O rescaled where m moved;
//   5. O^T += V^T P^T: V8 codes converted in registers after ldmatrix.trans, P times the V block
//      scale rounded to FP16 (FP16 cache: P rounded), P transposed into a B fragment by movmatrix.
// Epilogue (epilogue.cuh): the warps' partial O and l summed through shared memory; a single-split
// sequence writes o = fp16(O / l) and LSE, a multi-split one its (m, l, O) for the combine kernel.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "core/decode/decode_shape.hpp"
#include "kernels/common/check.cuh"
#include "kernels/common/copy.cuh"
#include "kernels/common/dependent_launch.cuh"
#include "kernels/common/mma.cuh"
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

// Shared-memory plan: [stage 0: K, V] ... [stage S-1: K, V] | scales [S][2] | tile maxima
// [key warps][rows] | row sums [key warps][rows] | row maxima [rows] | per-head |Q| maxima [rows].
// After the mainloop the stages hold the warps' partial O, [key warps][rows][d + 4] floats.
template <class Cfg>
struct DecodeSmem {
  using Tile = SwizzledTile<Cfg::kBlockN, Cfg::kTileRowBytes>;
  static constexpr int kReduceRow = Cfg::kHeadDim + 4;  // floats; the padding spreads rows over banks
  static constexpr int kReduceBytes = Cfg::kKeyWarps * Cfg::kRows * kReduceRow * 4;
  static constexpr int kStageArea = Cfg::kStages * Cfg::kStageBytes;
  static constexpr int kScales = kStageArea > kReduceBytes ? kStageArea : kReduceBytes;
  static constexpr int kTileMax = kScales + Cfg::kStages * 8;
  static constexpr int kRowSum = kTileMax + Cfg::kKeyWarps * Cfg::kRows * 4;
  static constexpr int kRowMax = kRowSum + Cfg::kKeyWarps * Cfg::kRows * 4;
  static constexpr int kHeadAbsmax = kRowMax + Cfg::kRows * 4;
  static constexpr int kBytes = kHeadAbsmax + Cfg::kRows * 4;
  // Tiles start 128-byte aligned (the swizzle steps XOR address bits); the base is aligned at run
  // time, hence the slack.
  static constexpr int kAllocBytes = kBytes + 128;
  static_assert(Cfg::kTileBytes % 128 == 0 && kScales % 16 == 0, "aligned tiles");

  __device__ __forceinline__ static char* align(char* raw) {
    const uint32_t misalign = smem_address(raw) & 127u;
    return raw + ((128u - misalign) & 127u);
  }
  __device__ __forceinline__ static uint32_t k(int stage) { return stage * Cfg::kStageBytes; }
  __device__ __forceinline__ static uint32_t v(int stage) { return stage * Cfg::kStageBytes + Cfg::kTileBytes; }
};

template <class Cfg>
struct DecodeMath {
  using Smem = DecodeSmem<Cfg>;
  using Tile = typename Smem::Tile;
  static constexpr int D = Cfg::kHeadDim;
  static constexpr int QF = Cfg::kQueryFrags;
  static constexpr int KS = Cfg::kKeySlices;
  static constexpr int DS = Cfg::kDimSlices;
  using Scores = float[KS][QF][4];
  // Q as B fragments, 32-bit words: FP16 cache: per k16 step {channels 2t, 2t+1}, {2t+8, 2t+9}
  // (t = lane % 4). INT8 cache, per k32 step: {4t, 4t+1}, {4t+2, 4t+3}, {16+4t, ...}, {18+4t, ...}:
  // the channel order in which a K8 A fragment converts to two FP16 A fragments (the dot product
  // sums over channels, so A and B only have to agree). Q8: per k32 step the s8 B fragment.
  using QHalf = uint32_t[QF][D / 8];
  using QCodes = uint32_t[QF][Cfg::kInt8 ? D / 16 : 1];
  using Output = float[DS][QF][4];

  // f of the thread's query columns 2t, 2t + 1 of each fragment (through nonzero_factor).
  using Factors = float[QF][2];

  // INT8 path: C = K8 Q8^T exactly, x = float(C), f = (scale_q * scale_log2) * scale_k.
  __device__ __forceinline__ static void int8_scores(Scores& x, Factors& fac, uint32_t k_lane, const QCodes& q8,
                                                     const float (&q_factor)[QF][2], float k_scale) {
    int acc[KS][QF][4];
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
#pragma unroll
      for (int f = 0; f < QF; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[ks][f][e] = 0;
#pragma unroll
    for (int kk = 0; kk < D / 32; ++kk) {
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        uint32_t a[4];
        ldmatrix_x4(a, Tile::step(k_lane, ks * 16, 2 * kk));
#pragma unroll
        for (int f = 0; f < QF; ++f) mma_m16n8k32_s32(acc[ks][f], a, q8[f][2 * kk], q8[f][2 * kk + 1]);
      }
    }
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
#pragma unroll
      for (int f = 0; f < QF; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e) x[ks][f][e] = __int2float_rn(acc[ks][f][e]);
#pragma unroll
    for (int f = 0; f < QF; ++f) {
      fac[f][0] = nonzero_factor(__fmul_rn(q_factor[f][0], k_scale));
      fac[f][1] = nonzero_factor(__fmul_rn(q_factor[f][1], k_scale));
    }
  }

  // FP16 path on the INT8 cache: K8 fragments converted to FP16 (codes are exact), x = the fp32
  // sums, f = k_scale * scale_log2.
  __device__ __forceinline__ static void code_scores(Scores& acc, Factors& fac, uint32_t k_lane, const QHalf& q,
                                                     float k_factor) {
    zero(acc);
#pragma unroll
    for (int kk = 0; kk < D / 32; ++kk) {
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        uint32_t a[4];
        ldmatrix_x4(a, Tile::step(k_lane, ks * 16, 2 * kk));
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = bias_codes(a[i]);
        // a[0] / a[1]: keys g / g+8, channels 4t..4t+3; a[2] / a[3]: channels 16+4t..
        const uint32_t lo[4] = {codes_to_half2(a[0], kBytes01), codes_to_half2(a[1], kBytes01),
                                codes_to_half2(a[0], kBytes23), codes_to_half2(a[1], kBytes23)};
        const uint32_t hi[4] = {codes_to_half2(a[2], kBytes01), codes_to_half2(a[3], kBytes01),
                                codes_to_half2(a[2], kBytes23), codes_to_half2(a[3], kBytes23)};
#pragma unroll
        for (int f = 0; f < QF; ++f) {
          mma_m16n8k16_f32(acc[ks][f], lo, q[f][4 * kk], q[f][4 * kk + 1]);
          mma_m16n8k16_f32(acc[ks][f], hi, q[f][4 * kk + 2], q[f][4 * kk + 3]);
        }
      }
    }
    fill(fac, nonzero_factor(k_factor));
  }

  // FP16 cache: x = fp32(K Q^T), f = scale_log2.
  __device__ __forceinline__ static void fp16_scores(Scores& acc, Factors& fac, uint32_t k_lane, const QHalf& q,
                                                     float scale_log2) {
    zero(acc);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        uint32_t a[4];
        ldmatrix_x4(a, Tile::step(k_lane, ks * 16, 2 * kk));
#pragma unroll
        for (int f = 0; f < QF; ++f) mma_m16n8k16_f32(acc[ks][f], a, q[f][2 * kk], q[f][2 * kk + 1]);
      }
    }
    fill(fac, scale_log2);
  }

  // -inf for keys past the cache end or the causal limit of the element's query row.
  __device__ __forceinline__ static void mask(Scores& s, const DecodeBlock& blk, int t, int kw, int qw, int lane) {
    const int key0 = t * Cfg::kBlockN + kw * Cfg::kWarpKeys + (lane >> 2);
#pragma unroll
    for (int f = 0; f < QF; ++f) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int visible = blk.visible(qw * Cfg::kWarpRows + f * 8 + 2 * (lane & 3) + e);
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            if (key0 + ks * 16 + half * 8 >= visible) s[ks][f][2 * half + e] = -INFINITY;
          }
        }
      }
    }
  }

  // O^T += V^T P^T for the warp's keys. P (C fragments: keys g and g+8, queries 2t and 2t+1) is
  // rounded to FP16 (times the V block scale for the INT8 cache) and transposed by movmatrix into
  // the B fragment (query g, keys 2t, 2t+1 and 2t+8, 2t+9) of one k16 step per key slice.
  // V8: ldmatrix.trans of 16-bit pairs of codes gives, per register, keys 2t, 2t+1 of channels
  // 2g and 2g+1; bytes {0, 2} and {1, 3} are then A-fragment rows g and g+8, so O^T row g of
  // channel slice c is channel 16c + 2g and row g+8 channel 16c + 2g + 1. FP16 V: the usual
  // ldmatrix.trans, row g = channel 16c + g, row g+8 = 16c + g + 8.
  __device__ __forceinline__ static void pv(Output& o, const Scores& p, uint32_t v_lane, float v_scale) {
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      uint32_t b[QF][2];
#pragma unroll
      for (int f = 0; f < QF; ++f) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const float p0 = Cfg::kInt8 ? __fmul_rn(p[ks][f][2 * half], v_scale) : p[ks][f][2 * half];
          const float p1 = Cfg::kInt8 ? __fmul_rn(p[ks][f][2 * half + 1], v_scale) : p[ks][f][2 * half + 1];
          b[f][half] = movmatrix_trans(pack_half2(p0, p1));
        }
      }
      if constexpr (Cfg::kInt8) {
#pragma unroll
        for (int dp = 0; dp < D / 32; ++dp) {
          uint32_t r[4];
          ldmatrix_x4_trans(r, Tile::step(v_lane, ks * 16, 2 * dp));
#pragma unroll
          for (int i = 0; i < 4; ++i) r[i] = bias_codes(r[i]);
          const uint32_t lo[4] = {codes_to_half2(r[0], kBytes02), codes_to_half2(r[0], kBytes13),
                                  codes_to_half2(r[1], kBytes02), codes_to_half2(r[1], kBytes13)};
          const uint32_t hi[4] = {codes_to_half2(r[2], kBytes02), codes_to_half2(r[2], kBytes13),
                                  codes_to_half2(r[3], kBytes02), codes_to_half2(r[3], kBytes13)};
#pragma unroll
          for (int f = 0; f < QF; ++f) {
            mma_m16n8k16_f32(o[2 * dp][f], lo, b[f][0], b[f][1]);
            mma_m16n8k16_f32(o[2 * dp + 1][f], hi, b[f][0], b[f][1]);
          }
        }
      } else {
#pragma unroll
        for (int ds = 0; ds < DS; ++ds) {
          uint32_t a[4];
          ldmatrix_x4_trans(a, Tile::step(v_lane, ks * 16, 2 * ds));
#pragma unroll
          for (int f = 0; f < QF; ++f) mma_m16n8k16_f32(o[ds][f], a, b[f][0], b[f][1]);
        }
      }
    }
  }


 private:
  template <class T>
  __device__ __forceinline__ static void zero(T (&acc)[KS][QF][4]) {
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
#pragma unroll
      for (int f = 0; f < QF; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[ks][f][e] = T(0);
  }

  __device__ __forceinline__ static void fill(Factors& fac, float value) {
#pragma unroll
    for (int f = 0; f < QF; ++f) fac[f][0] = fac[f][1] = value;
  }
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSm)
    decode_kernel(const __grid_constant__ DecodeKernelParams p) {
  using Smem = DecodeSmem<Cfg>;
  using Math = DecodeMath<Cfg>;
  using Tile = typename Smem::Tile;
  constexpr int D = Cfg::kHeadDim, QF = Cfg::kQueryFrags, KS = Cfg::kKeySlices, DS = Cfg::kDimSlices;
  constexpr int kKeyWarps = Cfg::kKeyWarps, kRows = Cfg::kRows, kStages = Cfg::kStages;
  extern __shared__ __align__(128) char smem_raw[];
  char* smem = Smem::align(smem_raw);
  const uint32_t smem_base = smem_address(smem);

  // The combine kernel may be scheduled as soon as every CTA of this grid has started.
  allow_dependent_launch();
  stamp_timeline(p, kTimelineStart);
  DecodeBlock blk;
  blk.init(p);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int kw = warp % kKeyWarps, qw = warp / kKeyWarps;
  const int g = lane >> 2, tq = lane & 3;

  DecodeTileLoader<Tile, Cfg::kThreads, Cfg::kInt8> tiles(p, blk, tid);
  const auto issue = [&](int stage) {
    tiles.issue_next(smem_base + Smem::k(stage), smem_base + Smem::v(stage), smem_base + Smem::kScales + stage * 8);
  };

  // The routing word and Q are requested before the cache tiles: issued after them, these few
  // loads queued behind every CTA's first tiles (19 MB at 16k x 8 x 4 new tokens), and the
  // prologue took 3-4 us longer (per-CTA timestamps, docs/perf/decode.md decode v10).
  // Routing word of (KV head, the sequence's query tile): tile t is INT8 when bit t / g is set.
  uint64_t word = 0;
  int group = 1;
  if constexpr (Cfg::kInt8) {
    word = p.words[static_cast<int64_t>(blk.kv_head) * p.batch + blk.b];
    group = p.group[blk.b];
  }
  // Q fragments, straight from global memory (each thread loads its 8-row fragment words).
  typename Math::QHalf q;
#pragma unroll
  for (int f = 0; f < QF; ++f) {
    const int r = qw * Cfg::kWarpRows + f * 8 + g;
    const bool valid = r < blk.rows;
    const __half* row = p.q + (blk.token(p, valid ? r : 0) * p.hq + blk.head(valid ? r : 0)) * D;
    if constexpr (Cfg::kInt8) {
#pragma unroll
      for (int kk = 0; kk < D / 32; ++kk) {
        const uint2 lo = valid ? *reinterpret_cast<const uint2*>(row + 32 * kk + 4 * tq) : make_uint2(0, 0);
        const uint2 hi = valid ? *reinterpret_cast<const uint2*>(row + 32 * kk + 16 + 4 * tq) : make_uint2(0, 0);
        q[f][4 * kk] = lo.x;
        q[f][4 * kk + 1] = lo.y;
        q[f][4 * kk + 2] = hi.x;
        q[f][4 * kk + 3] = hi.y;
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        q[f][2 * kk] = valid ? *reinterpret_cast<const uint32_t*>(row + 16 * kk + 2 * tq) : 0u;
        q[f][2 * kk + 1] = valid ? *reinterpret_cast<const uint32_t*>(row + 16 * kk + 8 + 2 * tq) : 0u;
      }
    }
  }

  // Prologue: kStages - 1 tiles in flight.
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (blk.tile_begin + i < blk.tile_end) issue(i);
    cp_async_commit();
  }
  const bool needs_q8 = Cfg::kInt8 && any_int8_tile(word, group, blk.tile_begin, blk.tile_end);
  TileRoutes routes(word, group, blk.tile_begin);

  // Q8 (INT8 route only): Q quantized per (sequence, head) = all the CTA's rows of that head, as
  // quantize_blockwise does with BLKQ = 128 >= 16 new tokens; same codes bit for bit.
  typename Math::QCodes q8;
  float q_factor[QF][2];
#pragma unroll
  for (int f = 0; f < QF; ++f) {
#pragma unroll
    for (int i = 0; i < (Cfg::kInt8 ? D / 16 : 1); ++i) q8[f][i] = 0u;
    q_factor[f][0] = q_factor[f][1] = 0.0f;
  }
  if constexpr (Cfg::kInt8) {
    if (needs_q8) {
      unsigned* head_absmax = reinterpret_cast<unsigned*>(smem + Smem::kHeadAbsmax);
      if (tid < kRows) head_absmax[tid] = 0u;
      __syncthreads();
#pragma unroll
      for (int f = 0; f < QF; ++f) {
        const int r = qw * Cfg::kWarpRows + f * 8 + g;
        float m = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 32; ++kk) {
          m = absmax8(make_uint4(q[f][4 * kk], q[f][4 * kk + 1], q[f][4 * kk + 2], q[f][4 * kk + 3]), m);
        }
        // Non-negative floats order like their bit patterns.
        if (r < blk.rows) atomicMax(&head_absmax[r % blk.heads], __float_as_uint(m));
      }
      __syncthreads();
#pragma unroll
      for (int f = 0; f < QF; ++f) {
        const int r = qw * Cfg::kWarpRows + f * 8 + g;
        const Int8Encoder encoder(int8_block_scale(__uint_as_float(head_absmax[r % blk.heads])));
#pragma unroll
        for (int kk = 0; kk < D / 32; ++kk) {
          const uint2 c =
              encoder.encode8(make_uint4(q[f][4 * kk], q[f][4 * kk + 1], q[f][4 * kk + 2], q[f][4 * kk + 3]));
          q8[f][2 * kk] = c.x;
          q8[f][2 * kk + 1] = c.y;
        }
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = qw * Cfg::kWarpRows + f * 8 + 2 * tq + e;
          q_factor[f][e] = __fmul_rn(int8_block_scale(__uint_as_float(head_absmax[col % blk.heads])), p.scale_log2);
        }
      }
    }
  }

  // Online state of this thread's columns (queries 2t and 2t+1 of each fragment). l is the sum
  // over this thread's keys; the lanes and warps are added once, after the last tile.
  float row_max[QF][2], row_sum[QF][2];
  typename Math::Output o;
#pragma unroll
  for (int f = 0; f < QF; ++f) {
    row_max[f][0] = row_max[f][1] = -INFINITY;
    row_sum[f][0] = row_sum[f][1] = 0.0f;
#pragma unroll
    for (int ds = 0; ds < DS; ++ds)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[ds][f][e] = 0.0f;
  }

  // ldmatrix addresses of this lane in stage 0; the loops step from them by constants.
  const int warp_key0 = kw * Cfg::kWarpKeys;
  const uint32_t k_lane = smem_base + Tile::offset(warp_key0 + (lane & 15), lane >> 4);
  const int j = lane >> 3, r8 = lane & 7;
  const uint32_t v_lane = smem_base + Cfg::kTileBytes +
                          (Cfg::kInt8 ? Tile::offset(warp_key0 + (j & 1) * 8 + r8, j >> 1)
                                      : Tile::offset(warp_key0 + (j >> 1) * 8 + r8, j & 1));
  float* tile_max_smem = reinterpret_cast<float*>(smem + Smem::kTileMax);
  const int mask_from = blk.len - blk.n + 1;  // tiles ending after this key may hold illegal pairs

  stamp_timeline(p, kTimelineLoopStart);
  int stage = 0;
  for (int t = blk.tile_begin; t < blk.tile_end; ++t) {
    // Tile t landed; every warp is done with tile t - 1, whose stage the next issue reuses.
    cp_async_wait<kStages - 2>();
    __syncthreads();
    if (t + kStages - 1 < blk.tile_end) issue(stage == 0 ? kStages - 1 : stage - 1);
    cp_async_commit();

    const uint32_t stage_bytes = stage * Cfg::kStageBytes;
    const float* scales = reinterpret_cast<const float*>(smem + Smem::kScales + stage * 8);
    float s[KS][QF][4];  // x, then p
    typename Math::Factors fac;
    if constexpr (Cfg::kInt8) {
      if (routes.next()) {
        Math::int8_scores(s, fac, k_lane + stage_bytes, q8, q_factor, scales[0]);
      } else {
        Math::code_scores(s, fac, k_lane + stage_bytes, q, __fmul_rn(scales[0], p.scale_log2));
      }
    } else {
      Math::fp16_scores(s, fac, k_lane + stage_bytes, q, p.scale_log2);
    }
    if ((t + 1) * Cfg::kBlockN > mask_from) Math::mask(s, blk, t, kw, qw, lane);

    // Row maxima of the whole tile: over this thread's keys, the 8 lanes of its column, and the
    // key warps (exact in any order, so every warp holds the same m as the emulator). f >= 0 and
    // rounding is monotone: the maximum of s = x * f is the maximum of x times f.
    float tile_max[QF][2];
#pragma unroll
    for (int f = 0; f < QF; ++f) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float x = -INFINITY;
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) x = fmaxf(x, fmaxf(s[ks][f][e], s[ks][f][e + 2]));
#pragma unroll
        for (int off = 4; off < 32; off <<= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
        tile_max[f][e] = __fmul_rn(x, fac[f][e]);
      }
    }
    if constexpr (kKeyWarps > 1) {
      if (g == 0) {
#pragma unroll
        for (int f = 0; f < QF; ++f)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            tile_max_smem[kw * kRows + qw * Cfg::kWarpRows + f * 8 + 2 * tq + e] = tile_max[f][e];
          }
      }
      __syncthreads();
#pragma unroll
      for (int f = 0; f < QF; ++f)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = qw * Cfg::kWarpRows + f * 8 + 2 * tq + e;
          float x = tile_max_smem[col];
#pragma unroll
          for (int w = 1; w < kKeyWarps; ++w) x = fmaxf(x, tile_max_smem[w * kRows + col]);
          tile_max[f][e] = x;
        }
    }

    // Online softmax in the log2 domain, the emulator's rounding points: the reference m moves
    // only when the tile's maximum passes it by more than kDecodeRescaleLog2 (or from -inf), and
    // p = exp2(fma(x, f, -m)) <= 2^kDecodeRescaleLog2.
    float alpha[QF][2];
#pragma unroll
    for (int f = 0; f < QF; ++f) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float ref = move_reference(row_max[f][e], tile_max[f][e], alpha[f][e]);
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            float& x = s[ks][f][2 * half + e];
            x = exp2_approx(__fmaf_rn(x, fac[f][e], -ref));
          }
        }
      }
    }
#pragma unroll
    for (int f = 0; f < QF; ++f) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float sum = 0.0f;
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
          for (int half = 0; half < 2; ++half) sum = __fadd_rn(sum, s[ks][f][2 * half + e]);
        }
        row_sum[f][e] = __fadd_rn(__fmul_rn(row_sum[f][e], alpha[f][e]), sum);
      }
    }
    // O *= alpha, skipped when no column of the warp moved its reference (alpha = 1 leaves O
    // unchanged): a reference moves only when a tile's maximum passes it by more than
    // kDecodeRescaleLog2, and the rescale is DS * QF * 4 multiplies per thread and tile.
    bool moved = false;
#pragma unroll
    for (int f = 0; f < QF; ++f) moved = moved || alpha[f][0] != 1.0f || alpha[f][1] != 1.0f;
    if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
      for (int ds = 0; ds < DS; ++ds)
#pragma unroll
        for (int f = 0; f < QF; ++f)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[ds][f][e] = __fmul_rn(o[ds][f][e], alpha[f][e & 1]);
    }

    Math::pv(o, s, v_lane + stage_bytes, Cfg::kInt8 ? scales[1] : 1.0f);
    stage = stage + 1 == kStages ? 0 : stage + 1;
  }

  // Epilogue: the warps' partial O^T and l meet in shared memory (the stages are free now).
  cp_async_wait<0>();
  stamp_timeline(p, kTimelineLoopEnd);
  mma_sync_epilogue<Cfg, Smem>(p, blk, smem, o, row_max, row_sum, kw, qw, g, tq, tid);
  finish_timeline(p, blk, Cfg::kInt8);
}

template <int kHeadDim, int kRows, CacheKind kCache>
void launch_decode(const DecodeKernelParams& p, int64_t total_splits, void* stream, const std::string& context) {
  using Cfg = DecodeConfig<kHeadDim, kRows, kCache>;
  constexpr int kSmemBytes = DecodeSmem<Cfg>::kAllocBytes;
  const auto kernel = decode_kernel<Cfg>;
  TILEMIX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes), context);
  TILEMIX_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared),
      context);
  const dim3 grid(static_cast<unsigned>(total_splits * p.hk * p.head_chunks));
  kernel<<<grid, Cfg::kThreads, kSmemBytes, static_cast<cudaStream_t>(stream)>>>(p);
  TILEMIX_LAUNCH_CHECK("decode_kernel", context + " rows=" + std::to_string(kRows) + " grid=" +
                                            std::to_string(grid.x) +
                                            ") smem=" + std::to_string(kSmemBytes));
}

}  // namespace tilemix::gpu
