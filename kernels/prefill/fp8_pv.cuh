#pragma once
// FP8 P V of one step (128 keys) in the warp-specialized mainloop (pv fp8 / routed), the
// operations core/quant_fp8.hpp states for a step's FP8 group (its FP8 halves): the softmax
// gives the group's keys p' = exp2(fma(raw, scale, c)), its largest at 448, and each row's g
// (OnlineSoftmax::update_fused_fp8); P8 = e4m3(p'), the group's sums t = P8 V8 from zero in the
// FP8 MMA (which keeps 13 bits of its sum: tests/kernels/test_fp8_mma_gpu.cpp), then O =
// fma(t * scale[c], g, O). Per 64 output channels one set of sums: the first is in flight beside
// the next step's scores and softmax, each further one issued once the one before it is folded
// into O (32 registers of sums at a time). P8 goes from the score registers to the A fragments
// without a shuffle: V8's columns follow them (core/quant_fp8.hpp, fp8_value_column).
#include <cstdint>

#include "kernels/common/wgmma.cuh"

namespace tilemix::gpu {

// Two floats as two E4M3 codes, `lo` in the low byte (RNE, saturating).
__device__ __forceinline__ uint32_t e4m3x2(float lo, float hi) {
  uint16_t packed;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(packed) : "f"(hi), "f"(lo));
  return packed;
}

// Half h's P8 as the A fragments of its two k32 steps: step kk covers keys 64 h + 32 kk .. + 31,
// score fragments j0 = 8 h + 4 kk .. j0 + 3; register 0 holds row g's keys 2t, 2t + 1, 2t + 8,
// 2t + 9 of the first 16, register 1 row g + 8's, registers 2 and 3 the second 16.
template <int kKeyFrags>
__device__ __forceinline__ void pack_fp8_half(const float (&s)[kKeyFrags][4], int h, uint32_t (&a)[2][4]) {
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
    const int j0 = 8 * h + 4 * kk;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j = j0 + 2 * (i / 2), r = i % 2;
      a[kk][i] = e4m3x2(s[j][2 * r], s[j][2 * r + 1]) | e4m3x2(s[j + 1][2 * r], s[j + 1][2 * r + 1]) << 16;
    }
  }
}

// The group's sums of output channels 64 cb .. 64 cb + 63 (64 x 64, f32, the m64n64 accumulator
// layout) = P8 V8 over its halves, fenced and issued (the caller commits, waits and folds them:
// fold_fp8_sums): the k32 steps of each half in `halves` (a[4 h], a[4 h + 1]: its P8), the first
// from zero. v8 is the shared address of the step's V stage, half h's V8 box (kDim rows of 64
// keys, 64-byte swizzle) from byte h * half_bytes.
__device__ __forceinline__ void issue_fp8_sums(float (&sums)[32], const uint32_t (&a)[8][4], uint32_t v8,
                                               uint32_t half_bytes, unsigned halves, int cb) {
  const uint64_t desc0 = sw64_desc(v8 + cb * 64 * 64), desc1 = sw64_desc(v8 + half_bytes + cb * 64 * 64);
  wgmma_fence();
  if (halves & 1u) {
    wgmma_m64n64k32_e4m3_rs(sums, a[0], desc0, 0);
    wgmma_m64n64k32_e4m3_rs(sums, a[1], desc_advance(desc0, 32), 1);
    if (halves & 2u) {
      wgmma_m64n64k32_e4m3_rs(sums, a[4], desc1, 1);
      wgmma_m64n64k32_e4m3_rs(sums, a[5], desc_advance(desc1, 32), 1);
    }
  } else {
    wgmma_m64n64k32_e4m3_rs(sums, a[4], desc1, 0);
    wgmma_m64n64k32_e4m3_rs(sums, a[5], desc_advance(desc1, 32), 1);
  }
}

// O(64 x kDim, f32: the m64 accumulator) channels 64 cb .. 64 cb + 63 += the landed sums with the
// channels' V scales (`scales`, kDim floats in shared memory) and g of the thread's rows (g and
// g + 8).
template <int kDim>
__device__ __forceinline__ void fold_fp8_sums(float (&o)[kDim / 2], const float (&sums)[32], const float* scales,
                                              const float (&g)[2], int lane, int cb) {
  const int t = lane % 4;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 sc = *reinterpret_cast<const float2*>(scales + 64 * cb + 8 * j + 2 * t);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float& out = o[4 * (8 * cb + j) + e];
      out = __fmaf_rn(__fmul_rn(sums[4 * j + e], e % 2 ? sc.y : sc.x), g[e / 2], out);
    }
  }
}

}  // namespace tilemix::gpu
