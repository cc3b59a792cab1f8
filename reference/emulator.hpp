#pragma once
// CPU model of the routed kernel's numerics (SPEC 7). It walks the same compute tiles in the same
// order as the kernel and rounds at the same points, so a GPU kernel is compared with it tightly.
//
// Per (sequence, query head, query tile m), key tiles n in [0, legal_tile_end(m)) in `key_order`,
// in steps of EmulatorOptions::softmax_tiles tiles (scores per tile, the state update per step):
//   route  = (word >> (n / g)) & 1
//   FP16:  s = fp32(sum_k q*k) * scale_log2                  (scale_log2 = softmax_scale * log2 e, fp32)
//          products exact, summed in double in ascending channel order, rounded once to fp32
//   INT8:  s = fp32(sum_k q8*k8) * ((scale_q * scale_log2) * scale_k)   (int32 sum, exact)
//          scale_q of the row's BLKQ block and query head, scale_k of the key's BLKK block and KV head
//   smooth_k (Numerics): both paths read the smoothed keys Ks in place of K (the INT8 path the
//          codes and scales of Ks), core/quant.hpp smooth_keys
//   illegal (causal / bounds) elements: -inf
//   m_new  = max(m, rowmax(s))            [fp16 state: rounded to fp16]
//   p      = exp2(s - m_new), alpha = exp2(m - m_new)   (m_new = -inf uses 0)
//            [fused_score_scale: p = exp2(fma(raw, scale, -m_new)), s = raw * scale as above]
//   l      = l * alpha + rowsum(p)        [fp16 state: rounded]; rowsum of the fp32 p, keys ascending
//   O      = O * alpha + fp16(p) @ V      [accum fp16: O*alpha rounded, then rounded after every
//                                          16-key chunk; fp16 state: O rounded after the tile]
//          fp32 adds into O, keys ascending within the tile, channel by channel
//   pv fp8 / routed (Numerics::fp8_pv of the tile's route): the step's FP8 tiles as one group,
//          P V in FP8 as core/quant_fp8.hpp states it (P8 from the group's own exponential p',
//          its largest at 448, l += g * rowsum(p'), V8 per channel and 128-key block, the
//          group's sums in fp32, then one fma into O with g after the FP16 tiles); needs
//          block_n 64, softmax_tiles <= 2 and accum fp32
// Final: o = fp16(O * (1 / l)), reciprocal and product each rounded to fp32; lse = (m + log2 l) * ln 2 in fp32; a row with l == 0 gives o = 0, lse = -inf.
//   smooth_k: lse += fp32(qkbar[row] * softmax_scale) for rows with l > 0.
// Both quantization modes use the same codes and scales, so they give bit-identical results.
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
  // Key tiles per online-softmax step: the state (m, l, O) is updated once per step of this many
  // consecutive tiles (aligned at multiples of it; the last step of a row may hold fewer), as the
  // kernel that is emulated does (prefill v3: 2, gpu::prefill_emulation).
  int softmax_tiles = 1;
  // The score scale folded into the exponent, as prefill v3 does: p = exp2(fma(raw, scale, -ref))
  // with raw = fp32(sum_k q*k) or fp32(sum_k q8*k8) and scale = scale_log2 or the INT8 factor; the
  // row maximum is still that of round(raw * scale). A scale below FLT_MIN is taken as FLT_MIN.
  bool fused_score_scale = false;
};

struct EmulatorResult {
  std::vector<uint16_t> o;  // FP16 bits [total_q, hq, d]
  std::vector<float> lse;   // [hq, total_q]
};

// Uses the plan's geometry and words; quantizes Q/K (Ks with smooth_k) with quantize_blockwise
// (both modes share it).
// `shape` must be validated and `plan` built for it. Uses every OpenMP thread.
EmulatorResult emulate_attention(const AttentionShape& shape, const AttentionInputs& inputs, const RoutingPlan& plan,
                                 const EmulatorOptions& options);

}  // namespace tilemix
