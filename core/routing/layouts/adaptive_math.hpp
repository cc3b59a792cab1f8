#pragma once
// The floating-point steps of layout `adaptive` that the CPU and GPU word builders share, so that
// both round at the same points: every operation is one correctly rounded FP32 operation
// (__fmul_rn, __fadd_rn, __fmaf_rn, __fdiv_rn on the GPU; the host file that uses them is compiled
// with -ffp-contract=off), and exp2 is the project's own polynomial, not a library's.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/host_device.hpp"

namespace tilemix::layouts {

// The pooled sums run in lanes: lane w adds rows (keys) w, w + 8, w + 16, ... in order, each from
// 0, and the lanes are added in lane order from 0; a GPU block sums a channel in 8 threads.
constexpr int kAdaptivePoolLanes = 8;

constexpr float kAdaptiveLog2e = 1.44269504088896340736f;
// exp2 arguments below this are raised to it: 2^-126 is the smallest normal float, so every
// group weight stays positive and 2^i is built exactly from its exponent bits.
constexpr float kAdaptiveMinExponent = -126.0f;

TILEMIX_HOST_DEVICE inline float adaptive_add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

TILEMIX_HOST_DEVICE inline float adaptive_mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

TILEMIX_HOST_DEVICE inline float adaptive_fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

TILEMIX_HOST_DEVICE inline float adaptive_div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

TILEMIX_HOST_DEVICE inline float adaptive_floor(float x) {
#if defined(__CUDA_ARCH__)
  return floorf(x);
#else
  return std::floor(x);
#endif
}

TILEMIX_HOST_DEVICE inline float adaptive_from_bits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

TILEMIX_HOST_DEVICE inline uint32_t adaptive_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
#endif
}

// 2^t for t <= 0: t is clamped to [-126, 0] (NaN to -126), split into i = floor(t) and
// f = t - i in [0, 1) (exact), 2^f by Horner's rule over the Taylor terms ln(2)^n / n! up to
// n = 7 (relative error below 2e-6; only its determinism matters), times 2^i from its exponent
// bits (exact: the product stays normal).
TILEMIX_HOST_DEVICE inline float adaptive_exp2(float t) {
  if (!(t >= kAdaptiveMinExponent)) t = kAdaptiveMinExponent;
  if (t > 0.0f) t = 0.0f;
  const float i = adaptive_floor(t);
  const float f = adaptive_add(t, -i);
  float p = 1.5252733804059840e-5f;             // ln2^7 / 7!
  p = adaptive_fma(p, f, 1.5403530393381608e-4f);  // ln2^6 / 6!
  p = adaptive_fma(p, f, 1.3333558146428443e-3f);  // ln2^5 / 5!
  p = adaptive_fma(p, f, 9.6181291076284772e-3f);  // ln2^4 / 4!
  p = adaptive_fma(p, f, 5.5504108664821580e-2f);  // ln2^3 / 3!
  p = adaptive_fma(p, f, 2.4022650695910071e-1f);  // ln2^2 / 2!
  p = adaptive_fma(p, f, 6.9314718055994531e-1f);  // ln2
  p = adaptive_fma(p, f, 1.0f);
  const int exponent = static_cast<int>(i) + 127;  // in [1, 127]
  return adaptive_mul(p, adaptive_from_bits(static_cast<uint32_t>(exponent) << 23));
}

// A float's order as an unsigned integer (larger float, larger key); NaN is the smallest.
TILEMIX_HOST_DEVICE inline uint32_t adaptive_order_key(float x) {
  if (x != x) return 0u;
  const uint32_t bits = adaptive_to_bits(x);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// Selection key of legal group j of the sequence's query tile m: the score's order, above every
// score for a kept sink, then the lower position (m * 64 + j) first. Keys are distinct, so the
// N largest are one set whatever the order they are compared in.
constexpr uint32_t kAdaptiveKeptKey = 0xffffffffu;
TILEMIX_HOST_DEVICE inline uint64_t adaptive_selection_key(uint32_t order_key, int64_t m, int j) {
  const uint64_t position = static_cast<uint64_t>(m) * 64u + static_cast<uint64_t>(j);
  return (static_cast<uint64_t>(order_key) << 32) | (0xffffffffull - position);
}

}  // namespace tilemix::layouts
