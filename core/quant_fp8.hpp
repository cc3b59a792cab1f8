#pragma once
// FP8 P V (SPEC 5 `pv`): the numerics that the CPU emulator and the GPU kernels share.
//
// V, per (sequence, block of kVScaleKeys = 128 key tokens (a softmax step of two routing tiles),
// KV head, channel); blocks restart at each sequence start and the last may be partial:
//   scale = max|float(v)| / 448 in FP32 (correctly rounded division; NaN dropped from the max)
//   code  = e4m3(fp32(float(v) / scale)): one correctly rounded division, then round to nearest
//           even with saturation to +-448 (cvt.rn.satfinite.e4m3x2.f32); 0 for an all-zero
//           block (scale 0); a NaN value gives the NaN code.
// The FP8 group of a query row and step: the step's FP8 tiles (every tile with pv fp8, the
// INT8-routed ones with pv routed; one V scale block), m_group their row maximum of s, ref the
// step's reference of the FP16 path (m_new, or 0 for a row without a legal key so far). P8 comes
// from its own exponential, shifted so that the group's largest key lands on 448:
//   c      = log2(448) - m_group                  (FP32: kFp8E4m3MaxLog2 - m_group)
//   p'     = exp2(s + c)                          (the kernel: exp2(fma(raw, scale, c)))
//   P8     = e4m3(p')                             (p' <= 448 up to rounding; RNE, saturating)
//   g      = exp2(-ref - c)                       (= 2^(m_group - ref) / 448)
//   l      = l * alpha + (sum of the FP16 tiles' p + g * sum of p')
//   t[c]   = sum over the group's keys of P8 * V8[c] in FP32   (products exact)
//   O[c]  += fp32(t[c] * scale[c]) * g            (one fused multiply-add into O, after the
//                                                   step's FP16 tiles)
// so P8 spans the whole E4M3 range for every row and step, whatever the step's share of the row's
// mass, at one FMA and one exponential per key as on the FP16 path (no multiply by a factor); a
// key below 2^-18 of its group's maximum rounds to 0 (at most 2^-12 of the group's mass); a group
// far below the row's maximum has g = 0 (the GPU flushes subnormals). A row without a legal key
// in the group has c = g = 0 (its p' are exp2(-inf) = 0).
// One group and one scale per step make the step's FP8 P V one product with one fold into O.
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/fp8.hpp"
#include "core/host_device.hpp"

namespace tilemix {

constexpr int kBlockV = 64;         // V8 columns per block: one routing tile (V shares K's block offsets)
constexpr int kVScaleKeys = 128;    // keys per V scale: a softmax step (two blocks share their scales)
// log2(448) rounded to FP32: the exponent at which P8 reaches the E4M3 maximum.
inline constexpr float kFp8E4m3MaxLog2 = 8.80735492205760f;

inline float fp8_scale(float absmax) { return absmax / kFp8E4m3Max; }

inline uint8_t fp8_code(float x, float scale) { return scale == 0.0f ? uint8_t{0} : float_to_fp8_e4m3(x / scale); }

// Where the FP8 MMA finds V8: per KV head and channel one row of keys, each sequence's keys from
// column 64 * (its first V block), its last block padded with code 0; inside every 32 keys the
// order the P fragment of the accumulator layout reads them in (thread t of a quad holds keys
// 2t, 2t + 1, 2t + 8 and 2t + 9 of each 16 as the A operand's k = 4t .. 4t + 3), so P goes from
// the score registers to the MMA without a shuffle. Key x of a 32-key chunk sits at column:
TILEMIX_HOST_DEVICE inline int fp8_value_column(int x) {
  const int half = x / 16, y = x % 16;
  const int quad_thread = (y % 8) / 2, k_in_thread = 2 * (y / 8) + y % 2;
  return 16 * half + 4 * quad_thread + k_in_thread;
}

// Its inverse: the key of a 32-key chunk at column x (what quantize_values_fp8 writes there).
TILEMIX_HOST_DEVICE inline int fp8_value_key(int x) {
  const int half = x / 16, y = x % 16;
  const int quad_thread = y / 4, k_in_thread = y % 4;
  return 16 * half + 8 * (k_in_thread / 2) + 2 * quad_thread + k_in_thread % 2;
}

// V8 codes and scales of one call.
struct Fp8Values {
  int heads = 0, d = 0;
  // [heads][d][columns], columns = 64 * block_offset.back(): the layout fp8_value_column states.
  std::vector<uint8_t> codes;
  // [block][heads][d], block_offset as scale_block_offsets(cu, 64); blocks 2i and 2i + 1 of a
  // sequence hold the scale of their 128 keys.
  std::vector<float> scales;
  std::vector<int64_t> block_offset;   // B + 1 entries
  int64_t columns() const { return block_offset.empty() ? 0 : block_offset.back() * kBlockV; }

  // Column of key `token_in_seq` of sequence b.
  int64_t column(int b, int64_t token_in_seq) const {
    const int64_t chunk = token_in_seq / 32;
    return block_offset[b] * kBlockV + 32 * chunk + fp8_value_column(static_cast<int>(token_in_seq % 32));
  }
  uint8_t code(int b, int64_t token_in_seq, int h, int c) const {
    return codes[(static_cast<size_t>(h) * d + c) * static_cast<size_t>(columns()) +
                 static_cast<size_t>(column(b, token_in_seq))];
  }
  float scale(int b, int64_t token_in_seq, int h, int c) const {
    return scales[(static_cast<size_t>(block_offset[b] + token_in_seq / kBlockV) * heads + h) * d + c];
  }
};

// v: FP16 bits [total_k, heads, d]. Uses every OpenMP thread.
Fp8Values quantize_values_fp8(const std::vector<uint16_t>& v, const std::vector<int64_t>& cu_seqlens_k, int heads,
                              int d);

// The exponent offset c and the factor g of an FP8 group's row (above); m_group = -inf (no legal
// key in the group) gives 0 and 0.
struct Fp8RowExponent {
  float c, g;
};
inline Fp8RowExponent fp8_row_exponent(float reference, float m_group) {
  if (m_group == -INFINITY) return {0.0f, 0.0f};
  const float c = kFp8E4m3MaxLog2 - m_group;
  return {c, std::exp2(-reference - c)};
}

}  // namespace tilemix
