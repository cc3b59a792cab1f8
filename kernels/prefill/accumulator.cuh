#pragma once
// The output accumulator O of the online softmax, in fp32 (accum fp32) or packed fp16 (accum
// fp16: the PV MMA accumulates in fp16, so O is rounded after every 16-key step as the emulator
// models). Fragments: [row slice][n8 output fragment], rows lane/4 and lane/4 + 8: the layout of
// mma.sync's C and, with one row slice, of wgmma's m64 accumulator.
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/common/mma.cuh"
#include "kernels/prefill/softmax.cuh"

namespace tilemix::gpu {

template <class Cfg, bool kHalf>
struct OutputAccumulator;

template <class Cfg>
struct OutputAccumulator<Cfg, false> {
  float c[Cfg::kRowSlices][Cfg::kDimFrags][4];

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int mi = 0; mi < Cfg::kRowSlices; ++mi)
#pragma unroll
      for (int ni = 0; ni < Cfg::kDimFrags; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) c[mi][ni][e] = 0.0f;
  }

  __device__ __forceinline__ void rescale(const float (&alpha)[2 * Cfg::kRowSlices]) {
#pragma unroll
    for (int mi = 0; mi < Cfg::kRowSlices; ++mi)
#pragma unroll
      for (int ni = 0; ni < Cfg::kDimFrags; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) c[mi][ni][e] = __fmul_rn(c[mi][ni][e], alpha[mi * 2 + (e >> 1)]);
  }

  __device__ __forceinline__ void mma(int mi, int ni, const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_m16n8k16_f32(c[mi][ni], a, b0, b1);
  }

  __device__ __forceinline__ void round_to_half_state() {
#pragma unroll
    for (int mi = 0; mi < Cfg::kRowSlices; ++mi)
#pragma unroll
      for (int ni = 0; ni < Cfg::kDimFrags; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) c[mi][ni][e] = round_to_half(c[mi][ni][e]);
  }

  // Elements e and e + 1 (e even) of a fragment: two adjacent output columns of one row.
  __device__ __forceinline__ float2 pair(int mi, int ni, int e) const {
    return make_float2(c[mi][ni][e], c[mi][ni][e + 1]);
  }

  // The registers as a wgmma m64 accumulator (one row slice: the fragments in wgmma's order).
  __device__ __forceinline__ float (&wgmma_registers())[4 * Cfg::kDimFrags] {
    static_assert(Cfg::kRowSlices == 1, "a wgmma accumulator is one row slice per warp");
    return reinterpret_cast<float(&)[4 * Cfg::kDimFrags]>(c);
  }
};

template <class Cfg>
struct OutputAccumulator<Cfg, true> {
  uint32_t c[Cfg::kRowSlices][Cfg::kDimFrags][2];  // f16x2: row lane/4, row lane/4 + 8

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int mi = 0; mi < Cfg::kRowSlices; ++mi)
#pragma unroll
      for (int ni = 0; ni < Cfg::kDimFrags; ++ni) c[mi][ni][0] = c[mi][ni][1] = 0u;
  }

  // O * alpha in fp32, rounded to fp16 (the emulator rounds O * alpha before adding P V).
  __device__ __forceinline__ void rescale(const float (&alpha)[2 * Cfg::kRowSlices]) {
#pragma unroll
    for (int mi = 0; mi < Cfg::kRowSlices; ++mi)
#pragma unroll
      for (int ni = 0; ni < Cfg::kDimFrags; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float a = alpha[mi * 2 + h];
          float2 f = __half22float2(*reinterpret_cast<const __half2*>(&c[mi][ni][h]));
          f.x = __fmul_rn(f.x, a);
          f.y = __fmul_rn(f.y, a);
          const __half2 r = __float22half2_rn(f);
          c[mi][ni][h] = *reinterpret_cast<const uint32_t*>(&r);
        }
  }

  __device__ __forceinline__ void mma(int mi, int ni, const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_m16n8k16_f16(c[mi][ni], a, b0, b1);
  }

  __device__ __forceinline__ void round_to_half_state() {}  // already fp16

  __device__ __forceinline__ float2 pair(int mi, int ni, int e) const {
    return __half22float2(*reinterpret_cast<const __half2*>(&c[mi][ni][e >> 1]));
  }

  // The registers as a wgmma m64 f16 accumulator (f16x2 pairs in the order of the fp32 fragment).
  __device__ __forceinline__ uint32_t (&wgmma_registers())[2 * Cfg::kDimFrags] {
    static_assert(Cfg::kRowSlices == 1, "a wgmma accumulator is one row slice per warp");
    return reinterpret_cast<uint32_t(&)[2 * Cfg::kDimFrags]>(c);
  }
};

}  // namespace tilemix::gpu
