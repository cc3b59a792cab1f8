#pragma once
// INT8 cache codes to FP16 in registers, exactly and without integer-to-float conversions: the
// decode kernels convert K8 (the FP16 score route) and V8 (every P V product) on chip.
#include <cuda_fp16.h>

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

}  // namespace tilemix::gpu
