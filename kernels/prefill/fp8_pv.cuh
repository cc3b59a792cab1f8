#pragma once
// FP8 P V of one step (128 keys) in the warp-specialized mainloop (pv fp8 / routed), the
// operations core/quant_fp8.hpp states for a step's FP8 group (its FP8 halves): P8 = e4m3(p f)
// per row with f = 448 / (the group's row maximum of p), the group's sums t = P8 V8 from zero in
// the FP8 MMA (which keeps 13 bits of its sum: tests/kernels/test_fp8_mma_gpu.cpp), then
// O = fma(t * scale[c], g, O) with g = 1 / f. Per 64 output channels one set of sums: the first
// is in flight beside the next step's scores and softmax, each further one issued once the one
// before it is folded into O (32 registers of sums at a time). P8 goes from the score registers
// to the A fragments without a shuffle: V8's columns follow them (core/quant_fp8.hpp,
// fp8_value_column).
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

// The factors of a group's rows g and g + 8 (this thread's two rows): f scales p into P8, g back.
struct Fp8GroupFactors {
  float f[2], g[2];
};

// From the largest p of this thread's two rows (g and g + 8) per half (half_p_max[2 r + h]:
// OnlineSoftmax::update_fused) over the halves in the group (`halves` bit h: half h): pmax, then
// f = 448 / max(pmax, 2^-64) and g = max(pmax, 2^-64) / 448, both 0 for a row without a legal
// key in the group (pmax = 0). Both come from the approximate reciprocal and a product (f g = 1
// within a few ulps: the emulator forms them from 2^(m_new - m_group) apart anyway): a correctly
// rounded division calls a slow path whose call made ptxas spill the consumers.
__device__ __forceinline__ Fp8GroupFactors fp8_group_factors(const float (&half_p_max)[4], unsigned halves) {
  Fp8GroupFactors out;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float pmax = 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (halves >> h & 1u) pmax = fmaxf(pmax, half_p_max[2 * r + h]);
    }
    const float floor = fmaxf(pmax, 0x1p-64f);
    out.f[r] = pmax > 0.0f ? __fdividef(kFp8E4m3Max, floor) : 0.0f;
    out.g[r] = pmax > 0.0f ? __fmul_rn(floor, 1.0f / kFp8E4m3Max) : 0.0f;
  }
  return out;
}

// Half h's P8 as the A fragments of its two k32 steps: step kk covers keys 64 h + 32 kk .. + 31,
// score fragments j0 = 8 h + 4 kk .. j0 + 3; register 0 holds row g's keys 2t, 2t + 1, 2t + 8,
// 2t + 9 of the first 16, register 1 row g + 8's, registers 2 and 3 the second 16.
template <int kKeyFrags>
__device__ __forceinline__ void pack_fp8_half(const float (&s)[kKeyFrags][4], int h, const Fp8GroupFactors& k,
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
// channels' V scales (`scales`, kDim floats in shared memory) and the rows' g.
template <int kDim>
__device__ __forceinline__ void fold_fp8_sums(float (&o)[kDim / 2], const float (&sums)[32], const float* scales,
                                              const Fp8GroupFactors& k, int lane, int cb) {
  const int t = lane % 4;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 sc = *reinterpret_cast<const float2*>(scales + 64 * cb + 8 * j + 2 * t);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float& out = o[4 * (8 * cb + j) + e];
      out = __fmaf_rn(__fmul_rn(sums[4 * j + e], e % 2 ? sc.y : sc.x), k.g[e / 2], out);
    }
  }
}

}  // namespace tilemix::gpu
