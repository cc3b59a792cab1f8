#pragma once
// CPU model of the decode kernel's numerics (SPEC 5 and 7), tile for tile and split for split.
//
// Per (sequence b, query head h, split s): rows = the n_b new tokens; key tiles of the split in
// ascending order; state m, l, O in fp32 (decode keeps fp32 state and fp32 PV accumulation).
// Key tile n covers cache tokens [64 n, 64 n + 64) = one scale block, route = plan word bit
// (n / g) (INT8 cache only; the FP16 cache has no routing). scale_log2 = softmax_scale * log2 e.
//   Raw scores x and a factor f per (row, tile), s = x * f in the log2 domain:
//   INT8 cache, INT8 score path:  x = float(C), C = sum q8 * k8 (int32; Q quantized per
//                                 (sequence, head) with quantize_blockwise, BLKQ = 128, so one Q
//                                 block per sequence); f = (q_scale * scale_log2) * k_scale[block]
//   INT8 cache, FP16 score path:  x = fp32(sum q * float(k8))   (K8 dequantized on chip: the
//                                 codes are exact in FP16, the block scale applied after the dot)
//                                 f = k_scale[block] * scale_log2
//   FP16 cache:                   x = fp32(sum q * k), f = scale_log2
//   illegal elements (causal, bounds): no score, p = 0
//   tile max = fp32(max x * f) (= max of fp32(x * f): f >= 0 and rounding is monotone);
//   m_new = tile max if tile max > fp32(m + kDecodeRescaleLog2), else m (the reference moves only
//   by more than 6 in log2 units, or from -inf); ref = m_new or 0 when -inf;
//   p = exp2(fma(x, f, -ref)) (one rounding); alpha = exp2(m - ref); l = l * alpha + rowsum(p)
//   (rowsum of the fp32 p)
//   INT8 cache: O = O * alpha + fp16(p * v_scale[block]) @ float(v8)   (V8 converted on chip, its
//               block scale folded into P). The wgmma kernel forms p * v_scale as
//               exp2(fma(x, f, log2 v_scale - ref)) and adds rowsum * exp2(-log2 v_scale) to l:
//               the same values up to the approximate exp2 and log2 (within the GPU tests' tolerance)
//   FP16 cache: O = O * alpha + fp16(p) @ V
// Dot products sum in ascending channel / key order in double, rounded once to fp32 (as the
// prefill emulator does). Partial state of a split: (m_s, l_s, O_s unnormalized).
// Combine per (b, h, row), splits in ascending order: M = max m_s (-inf splits skipped);
// w_s = exp2(m_s - M); L = sum w_s l_s; o = fp16(sum w_s O_s / L); lse = (M + log2 L) * ln 2.
#include <cstdint>
#include <vector>

#include "core/decode/decode_shape.hpp"
#include "core/decode/kv_cache.hpp"
#include "core/decode/split_plan.hpp"
#include "core/routing/plan.hpp"

namespace tilemix {

struct DecodeResult {
  std::vector<uint16_t> o;  // FP16 bits [total_new, hq, d]
  std::vector<float> lse;   // [hq, total_new]
};

// `plan` is built for shape.attention_shape() with kDecodeGeometry; `splits` are the cuts of the
// call's launch plan (DecodeLaunchPlan::splits), so the partial states combined are the kernel's.
DecodeResult emulate_decode_int8(const DecodeShape& shape, const std::vector<uint16_t>& q, const Int8KvCache& cache,
                                 const RoutingPlan& plan, const DecodeSplitPlan& splits);
DecodeResult emulate_decode_fp16(const DecodeShape& shape, const std::vector<uint16_t>& q, const Fp16KvCache& cache,
                                 const DecodeSplitPlan& splits);

}  // namespace tilemix
