#pragma once
// FP8 E4M3 (the OCP "E4M3FN" format of the sm_89+ tensor cores: 1 sign, 4 exponent bits with bias
// 7, 3 mantissa bits, no infinities, S.1111.111 the only NaN) on the host: round to nearest even
// and saturation to +-448, the semantics of the GPU's cvt.rn.satfinite.e4m3x2.f32
// (__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)). Codes are raw uint8_t bits, as FP16 is
// uint16_t in core/fp16.hpp, for the emulator of an FP8 P V product.
#include <cmath>
#include <cstdint>

#include "core/fp16.hpp"

namespace tilemix {

inline constexpr float kFp8E4m3Max = 448.0f;
inline constexpr uint8_t kFp8E4m3Nan = 0x7f;  // what a NaN input becomes (the sign is dropped)

inline float fp8_e4m3_to_float(uint8_t code) {
  const float sign = (code & 0x80u) ? -1.0f : 1.0f;
  const int exponent = (code >> 3) & 0xf, mantissa = code & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::nanf("");
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: M x 2^-9
  return sign * std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
}

inline uint8_t float_to_fp8_e4m3(float f) {
  if (std::isnan(f)) return kFp8E4m3Nan;
  const uint8_t sign = std::signbit(f) ? 0x80u : 0x00u;
  const float a = std::fabs(f);
  if (a >= kFp8E4m3Max) return sign | 0x7eu;  // satfinite: every larger value and infinity
  if (a < 0x1p-6f) {
    // Subnormal grid of step 2^-9; a * 512 is exact, and 8 (the carry out) is the smallest normal's
    // code. std::nearbyint rounds to nearest even in the default rounding mode.
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  // Normal: keep 3 of the 23 mantissa bits, ties to even, in the float's bits (a carry moves into
  // the exponent, as it should); the result is at most 448's code 0x7e since a < 448.
  const uint32_t bits = float_to_bits(a);
  const uint32_t rounded = (bits + 0x7ffffu + ((bits >> 20) & 1u)) >> 20;
  const uint32_t code = rounded - ((127u - 7u) << 3);
  return sign | static_cast<uint8_t>(code > 0x7eu ? 0x7eu : code);
}

}  // namespace tilemix
