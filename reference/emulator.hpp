#pragma once
// CPU model of the routed kernel's numerics (SPEC 7). It walks the same compute tiles in the same
// order as the kernel and rounds at the same points, so a GPU kernel is compared with it tightly.
//
// Per (sequence, query head, query tile m), key tiles n of the legal range in `key_order`:
//   route  = (word >> (n / g)) & 1
//   FP16:  s = fp32(sum_k q*k) * scale_log2                  (scale_log2 = softmax_scale * log2 e, fp32)
//   INT8:  s = (fp32(sum_k q8*k8) * (scale_q * scale_log2)) * scale_k   (int32 sum, exact)
//   illegal (causal / bounds) elements: -inf
//   m_new  = max(m, rowmax(s))            [fp16 state: rounded to fp16]
//   p      = exp2(s - m_new), alpha = exp2(m - m_new)   (m_new = -inf uses 0)
//   l      = l * alpha + rowsum(p)        [fp16 state: rounded]
//   O      = O * alpha + fp16(p) @ V      [accum fp16: O*alpha rounded, then rounded after every
//                                          16-key chunk; fp16 state: O rounded after the tile]
// Final: o = fp16(O / l); lse = (m + log2 l) * ln 2; a row with l == 0 gives o = 0, lse = -inf.
#include <cstdint>
#include <vector>

#include "core/inputs/inputs.hpp"
#include "core/problem.hpp"
#include "core/routing/plan.hpp"

namespace tilemix {

enum class KeyOrder { ascending, descending };

struct EmulatorOptions {
  Numerics numerics;
  KeyOrder key_order = KeyOrder::ascending;
};

struct EmulatorResult {
  std::vector<uint16_t> o;  // FP16 bits [total_q, hq, d]
  std::vector<float> lse;   // [hq, total_q]
};

// Uses the plan's geometry and words; quantizes Q/K with quantize_blockwise (both modes share it).
EmulatorResult emulate_attention(const AttentionShape& shape, const AttentionInputs& inputs, const RoutingPlan& plan,
                                 const EmulatorOptions& options);

}  // namespace tilemix
