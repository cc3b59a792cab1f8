#pragma once
// The decode kernels' online-softmax rule (reference/decode_emulator.hpp states it): a lazy
// reference that moves only by more than kDecodeRescaleLog2, scores as x * f with a nonzero row
// factor, and the V block scale folded into the exponent of p.
#include <cfloat>
#include <cmath>

#include "core/decode/decode_shape.hpp"
#include "kernels/common/softmax_math.cuh"

namespace tilemix::gpu {

// One row's online-softmax step, the emulator's rule (both decode kernels): the reference
// `row_max` moves to the tile's maximum only when that passes it by more than kDecodeRescaleLog2
// (or from -inf). Returns what the tile's p subtract (the new reference, or 0 while the row has seen
// no legal key) and sets `alpha` = exp2(old reference - that), the factor of O and l.
__device__ __forceinline__ float move_reference(float& row_max, float tile_max, float& alpha) {
  const float m_new = tile_max > __fadd_rn(row_max, kDecodeRescaleLog2) ? tile_max : row_max;
  const float ref = m_new == -INFINITY ? 0.0f : m_new;
  alpha = exp2_approx(__fsub_rn(row_max, ref));
  row_max = m_new;
  return ref;
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

}  // namespace tilemix::gpu
