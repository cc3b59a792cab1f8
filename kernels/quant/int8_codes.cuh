#pragma once
// Blockwise symmetric INT8 codes on the GPU, bit-identical with core/quant.cpp: the scale and
// every code equal those of correctly rounded fp32 divisions (no reciprocal multiply decides a
// code), rounded to nearest even. quantize_queries, quantize_keys and the on-chip coding of the
// prefill kernels all use these.
#include <cuda_fp16.h>

#include <cstdint>

namespace tilemix::gpu {

// A dot product of INT8 codes over at most kMaxDotChannels channels lies within +-127^2 * 128 <
// 2^22, where float(c) is exact in two full-rate instructions: the integer add puts c into the
// mantissa of 1.5 * 2^23 (0x4B400000), the float subtract of 1.5 * 2^23 leaves it. I2F runs at a
// quarter of that rate and was the largest CUDA-core cost of an INT8-routed tile.
inline constexpr int kMaxDotChannels = 128;
static_assert(127 * 127 * kMaxDotChannels < (1 << 22), "INT8 dot products stay inside the exact range");
__device__ __forceinline__ float int8_dot_to_float(int c) {
  return __fsub_rn(__int_as_float(c + 0x4B400000), 12582912.0f);
}

// scale = max|x| / 127 (0 for an all-zero block).
__device__ __forceinline__ float int8_block_scale(float absmax) { return __fdiv_rn(absmax, 127.0f); }

// rne(x / scale) clamped to [-127, 127]; 0 when scale is 0. A NaN quotient converts to 0, as on
// the CPU.
__device__ __forceinline__ int int8_code(float x, float scale) {
  if (scale == 0.0f) return 0;
  const int r = __float2int_rn(__fdiv_rn(x, scale));
  return min(max(r, -127), 127);
}

// max(m, |x|) lane by lane over 8 packed halves, in half precision (exact): NaN elements are
// ignored (__hmax2 returns the other operand). half2_max gives the float maximum of both lanes.
__device__ __forceinline__ __half2 absmax8_half2(const uint4& chunk, __half2 m) {
  const uint32_t w[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) m = __hmax2(m, __habs2(*reinterpret_cast<const __half2*>(&w[i])));
  return m;
}
__device__ __forceinline__ float half2_max(__half2 m) {
  const float2 f = __half22float2(m);
  return fmaxf(f.x, f.y);
}

// max|x| over 8 packed halves. NaN elements are ignored (__hmax2 and fmaxf return the other
// operand), like std::max on the CPU.
__device__ __forceinline__ float absmax8(const uint4& chunk, float m) {
  const uint32_t w[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
  __half2 a = __habs2(*reinterpret_cast<const __half2*>(&w[0]));
#pragma unroll
  for (int i = 1; i < 4; ++i) a = __hmax2(a, __habs2(*reinterpret_cast<const __half2*>(&w[i])));
  const float2 f = __half22float2(a);
  return fmaxf(m, fmaxf(f.x, f.y));
}

// Codes of one block without a division per element, by the reciprocal rn(1 / scale) (bounds at
// encode4_unchecked). Near-ties of the exact quotient (and NaNs) take int8_code.
class Int8Encoder {
 public:
  __device__ __forceinline__ explicit Int8Encoder(float scale) {
    scale_ = scale;
    inv_ = scale == 0.0f ? 0.0f : __fdiv_rn(1.0f, scale);
  }

  // Codes of 8 packed halves, packed into 8 bytes in element order.
  __device__ __forceinline__ uint2 encode8(const uint4& chunk) const {
    return make_uint2(encode4(chunk.x, chunk.y), encode4(chunk.z, chunk.w));
  }

  // Codes of 4 packed halves (two half2 words), packed into 4 bytes in element order: four at a
  // time, so that a caller short of registers (the warp-specialized kernel's quantizer warps)
  // keeps only four quotients alive.
  __device__ __forceinline__ uint32_t encode4(uint32_t w0, uint32_t w1) const {
    bool near_tie = false;
    const uint32_t codes = encode4_unchecked(w0, w1, near_tie);
    if (near_tie) return encode4_exact(w0, w1);
    return codes;
  }

  // encode4 by the reciprocal alone: sets `near_tie` where a code may differ from the exact one
  // (then encode4_exact gives the codes). A caller coding many chunks tests once for all of them,
  // so that its chunks form one branch-free chain. Two FMAs and a subtraction per code: t =
  // fma(x, inv, 1.5 x 2^23) rounds p = x * inv (exact) to an integer r, ties to even, whose two's
  // complement then sits in the low mantissa bits; fma(x, inv, -r) is p - r within 2^-25. p lies
  // within 2^-17 of x / scale, and fl(x / scale) within 2^-16 of p, so unless |p - r| comes within
  // 2^-14 of 1/2, r is the correctly rounded quotient's code.
  __device__ __forceinline__ uint32_t encode4_unchecked(uint32_t w0, uint32_t w1, bool& near_tie) const {
    float x[4];
    unpack4(w0, w1, x);
    constexpr float kRound = 12582912.0f;
    uint32_t bits[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float t = __fmaf_rn(x[i], inv_, kRound);
      // A NaN fails the comparison (one predicated compare).
      near_tie |= !(fabsf(__fmaf_rn(x[i], inv_, -__fsub_rn(t, kRound))) < 0.5f - 0x1p-14f);
      bits[i] = __float_as_uint(t);
    }
    return pack4(bits[0], bits[1], bits[2], bits[3]);
  }

  // Codes of 4 packed halves by correctly rounded divisions (int8_code).
  __device__ __forceinline__ uint32_t encode4_exact(uint32_t w0, uint32_t w1) const {
    float x[4];
    unpack4(w0, w1, x);
    uint32_t bits[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) bits[i] = static_cast<uint32_t>(int8_code(x[i], scale_));
    return pack4(bits[0], bits[1], bits[2], bits[3]);
  }

  __device__ __forceinline__ float scale() const { return scale_; }

 private:
  __device__ __forceinline__ static void unpack4(uint32_t w0, uint32_t w1, float (&x)[4]) {
    const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&w0));
    const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&w1));
    x[0] = lo.x;
    x[1] = lo.y;
    x[2] = hi.x;
    x[3] = hi.y;
  }

  // Low bytes of four words, in order.
  __device__ __forceinline__ static uint32_t pack4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    return __byte_perm(__byte_perm(a, b, 0x0040), __byte_perm(c, d, 0x0040), 0x5410);
  }

  float scale_;
  float inv_;
};

// Max over a CTA; `scratch` holds one float per warp. Ends with every thread holding the result;
// the caller must not reuse `scratch` before a later barrier.
template <int kWarps>
__device__ __forceinline__ float block_absmax(float m, float* scratch) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = m;
  __syncthreads();
  float r = scratch[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) r = fmaxf(r, scratch[w]);
  return r;
}

}  // namespace tilemix::gpu
