#pragma once
// FP8 P V of one routing tile (64 keys) in the warp-specialized mainloop (pv fp8 / routed), the
// operations core/quant_fp8.hpp states: P8 = e4m3(p f) per row with f = 448 / (the tile's row
// maximum of p), the tile's sums t = P8 V8 from zero in the FP8 MMA (which keeps 13 bits of its
// sum: tests/kernels/test_fp8_mma_gpu.cpp), then O = fma(t * scale[c], g, O) with g = 1 / f.
// P8 goes from the score registers to the A fragments without a shuffle: V8's columns follow them
// (core/quant_fp8.hpp, fp8_value_column).
#include <cstdint>

#include "kernels/common/wgmma.cuh"
#include "core/quant_fp8.hpp"

namespace tilemix::gpu {

// Two floats as two E4M3 codes, `lo` in the low byte (RNE, saturating).
__device__ __forceinline__ uint32_t e4m3x2(float lo, float hi) {
  uint16_t packed;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(packed) : "f"(hi), "f"(lo));
  return packed;
}

// The factors of a tile's rows g and g + 8 (this thread's two rows): f scales p into P8, g back.
struct Fp8TileFactors {
  float f[2], g[2];
};

// From the step's probabilities s (the m64 score fragment: s[j][e] row g + 8 (e / 2), key 8 j +
// 2 t + e % 2) of half h: each row's maximum over its quad, then f = 448 / max(pmax, 2^-64) and
// g = max(pmax, 2^-64) / 448, both 0 for a row without a legal key (pmax = 0).
template <int kKeyFrags>
__device__ __forceinline__ Fp8TileFactors fp8_tile_factors(const float (&s)[kKeyFrags][4], int h) {
  Fp8TileFactors out;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float pmax = 0.0f;
#pragma unroll
    for (int j = 8 * h; j < 8 * h + 8; ++j) pmax = fmaxf(pmax, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
    pmax = fmaxf(pmax, __shfl_xor_sync(0xffffffffu, pmax, 1));
    pmax = fmaxf(pmax, __shfl_xor_sync(0xffffffffu, pmax, 2));
    const float floor = fmaxf(pmax, 0x1p-64f);
    out.f[r] = pmax > 0.0f ? __fdiv_rn(kFp8E4m3Max, floor) : 0.0f;
    out.g[r] = pmax > 0.0f ? __fdiv_rn(floor, kFp8E4m3Max) : 0.0f;
  }
  return out;
}

// Half h's P8 as the A fragments of its two k32 steps: step kk covers keys 64 h + 32 kk .. + 31,
// score fragments j0 = 8 h + 4 kk .. j0 + 3; register 0 holds row g's keys 2t, 2t + 1, 2t + 8,
// 2t + 9 of the first 16, register 1 row g + 8's, registers 2 and 3 the second 16.
template <int kKeyFrags>
__device__ __forceinline__ void pack_fp8_half(const float (&s)[kKeyFrags][4], int h, const Fp8TileFactors& k,
                                              uint32_t (&a)[2][4]) {
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
    const int j0 = 8 * h + 4 * kk;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j = j0 + 2 * (i / 2), r = i % 2;
      const float f = k.f[r];
      a[kk][i] = e4m3x2(__fmul_rn(s[j][2 * r], f), __fmul_rn(s[j][2 * r + 1], f)) |
                 e4m3x2(__fmul_rn(s[j + 1][2 * r], f), __fmul_rn(s[j + 1][2 * r + 1], f)) << 16;
    }
  }
}

// O(64 x kDim, f32, the m64 accumulator) += the tile's FP8 P V: per 64 output channels one
// m64n64 pair of k32 steps into zeroed sums, waited for, then folded into O with the channels'
// V scales (`scales`, kDim floats in shared memory) and the rows' g. v8 is the shared address of
// the tile's V8 box (kDim rows of 64 keys, 64-byte swizzle). Waits for every wgmma group in flight.
template <int kDim>
__device__ __forceinline__ void fp8_pv_tile(float (&o)[kDim / 2], const uint32_t (&a)[2][4], uint32_t v8,
                                            const float* scales, const Fp8TileFactors& k, int lane) {
  const int t = lane % 4;
#pragma unroll
  for (int cb = 0; cb < kDim / 64; ++cb) {
    float sum[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) sum[i] = 0.0f;
    wgmma_fence_operands(sum);
    wgmma_fence();
    const uint64_t desc = sw64_desc(v8 + cb * 64 * 64);
    wgmma_m64n64k32_e4m3_rs(sum, a[0], desc, 0);
    wgmma_m64n64k32_e4m3_rs(sum, a[1], desc_advance(desc, 32), 1);
    wgmma_commit();
    wgmma_wait_all();
    wgmma_fence_operands(sum);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float2 sc = *reinterpret_cast<const float2*>(scales + 64 * cb + 8 * j + 2 * t);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float& out = o[4 * (8 * cb + j) + e];
        out = __fmaf_rn(__fmul_rn(sum[4 * j + e], e % 2 ? sc.y : sc.x), k.g[e / 2], out);
      }
    }
  }
}

}  // namespace tilemix::gpu
