#pragma once
// Register-level helpers of the decode kernels: INT8 codes to FP16 on chip, the row factor of the
// scores, the fragment transpose that turns P into an MMA B operand, and the 4-byte cp.async that
// brings a tile's scales along.
#include <cuda_fp16.h>

#include <cfloat>
#include <cstdint>

namespace tilemix::gpu {

// The four codes of `codes` (signed bytes) with 128 added: the unsigned byte of each is then
// code + 128. One XOR serves the two conversions below.
__device__ __forceinline__ uint32_t bias_codes(uint32_t codes) { return codes ^ 0x80808080u; }

// Byte selectors for codes_to_half2: {byte 0, byte 1} and so on.
inline constexpr uint32_t kBytes01 = 0x4140u;
inline constexpr uint32_t kBytes23 = 0x4342u;
inline constexpr uint32_t kBytes02 = 0x4240u;
inline constexpr uint32_t kBytes13 = 0x4341u;

// Two codes of a biased word as a half2 (the lower selected byte in the low half), exactly: each
// byte becomes the mantissa of 1024 + (code + 128), where FP16 steps by 1, and subtracting 1152
// leaves the code. Two instructions per pair, no integer-to-float conversion.
__device__ __forceinline__ uint32_t codes_to_half2(uint32_t biased, uint32_t selector) {
  const uint32_t h = __byte_perm(biased, 0x64646464u, selector);
  const __half2 r = __hsub2(*reinterpret_cast<const __half2*>(&h), __half2half2(__ushort_as_half(0x6480)));
  return *reinterpret_cast<const uint32_t*>(&r);
}

// Transposes an 8x8 matrix of 16-bit elements held as an m8n8 fragment (thread t: row t/4,
// columns 2(t%4) and 2(t%4)+1) into the fragment of its transpose.
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// The row factor f of s = x * f as the kernels use it. f = 0 comes from a zero block scale (whose
// codes, and hence x, are all 0) or an underflowed product; FLT_MIN in its place leaves x * f = 0
// for x = 0 and lets -inf (an illegal key) pass through fma(x, f, -m) as -inf instead of NaN.
__device__ __forceinline__ float nonzero_factor(float f) { return f > 0.0f ? f : FLT_MIN; }

// log2 of a V block scale: the wgmma decode kernel folds the scale into the exponent of p, so
// that exp2(s - ref + log2 v_scale) is the P V operand p * v_scale before its FP16 rounding, with
// no multiply per score, and the row sums take exp2(-log2 v_scale) back once per tile. (The
// mma.sync kernel, with few scores per thread and tile at 1 to 4 new tokens, multiplies: decode
// v53.) Scales below 2^-64 are raised to it: every p * v_scale (p <= 2^6 with the lazy
// reference) is then below FP16's smallest subnormal and rounds to 0 either way, and what the
// flush of exp2 drops from l (p < 2^-62) is below FP32's resolution of a sum that holds the row's
// largest p >= 2^-6.
__device__ __forceinline__ float v_scale_exponent(float v_scale) { return __log2f(fmaxf(v_scale, 0x1p-64f)); }

// 4-byte global -> shared asynchronous copy (the .ca form: 4 bytes may not bypass L1).
__device__ __forceinline__ void cp_async_4(uint32_t smem_addr, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr), "l"(gmem) : "memory");
}

}  // namespace tilemix::gpu
