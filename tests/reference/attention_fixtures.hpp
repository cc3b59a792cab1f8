#pragma once
// Small builders shared by the reference, emulator and exposure tests: shapes, seeded FP16
// inputs, routing plans, and output comparisons.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/decode/decode_shape.hpp"
#include "core/fp16.hpp"
#include "core/inputs/inputs.hpp"
#include "core/metrics.hpp"
#include "core/problem.hpp"
#include "core/routing/layout.hpp"
#include "core/routing/plan.hpp"
#include "core/tiling.hpp"

namespace tilemix::testing {

inline AttentionShape make_shape(int hq, int hk, int d, bool causal, const std::vector<int64_t>& lq,
                                 const std::vector<int64_t>& lk, float softmax_scale = 0.0f) {
  AttentionShape s;
  s.hq = hq;
  s.hk = hk;
  s.d = d;
  s.causal = causal;
  s.softmax_scale = softmax_scale;
  s.cu_seqlens_q = prefix_sums(lq);
  s.cu_seqlens_k = prefix_sums(lk);
  validate(s);
  return s;
}

// A decode shape as given (tests of validation call validate_decode themselves).
inline DecodeShape decode_shape(int hq, int hk, int d, std::vector<int64_t> cache_len, std::vector<int64_t> new_tokens,
                                float softmax_scale = 0.0f) {
  DecodeShape s;
  s.hq = hq;
  s.hk = hk;
  s.d = d;
  s.softmax_scale = softmax_scale;
  s.cache_len = std::move(cache_len);
  s.new_tokens = std::move(new_tokens);
  return s;
}

inline DecodeShape make_decode_shape(int hq, int hk, int d, std::vector<int64_t> cache_len,
                                     std::vector<int64_t> new_tokens, float softmax_scale = 0.0f) {
  DecodeShape s = decode_shape(hq, hk, d, std::move(cache_len), std::move(new_tokens), softmax_scale);
  validate_decode(s);
  return s;
}

// Values as FP16 bits (round to nearest even).
inline std::vector<uint16_t> to_half_bits(const std::vector<float>& x) {
  std::vector<uint16_t> out;
  for (float v : x) out.push_back(float_to_half(v));
  return out;
}

inline AttentionInputs seeded_inputs(const AttentionShape& s, uint64_t seed, InputKind kind = InputKind::gaussian) {
  InputSpec spec;
  spec.kind = kind;
  spec.seed = seed;
  return make_inputs(s, spec);
}

inline RoutingPlan layout_plan(const AttentionShape& s, TileGeometry geometry, LayoutKind layout, double ratio = 0.0,
                               uint64_t seed = 1) {
  RoutingRequest request;
  request.layout = layout;
  request.ratio = ratio;
  request.seed = seed;
  request.geometry = geometry;
  return make_plan(s, request);
}

// Every legal group on INT8 (`int8`) or on FP16.
inline RoutingPlan uniform_plan(const AttentionShape& s, TileGeometry geometry, bool int8) {
  return layout_plan(s, geometry, int8 ? LayoutKind::one : LayoutKind::zero);
}

// The plan's words with `keep(kv_head, b, m)` ANDed into each one.
template <typename Mask>
RoutingPlan masked_plan(RoutingPlan plan, Mask keep) {
  std::vector<uint64_t> words = plan.words;
  for (int h = 0; h < plan.hk; ++h) {
    for (int b = 0; b < static_cast<int>(plan.tilings.size()); ++b) {
      for (int m = 0; m < plan.tilings[b].tm; ++m) {
        words[static_cast<size_t>(h) * plan.total_tiles() + plan.tile_offset[b] + m] &= keep(h, b, m);
      }
    }
  }
  set_explicit_words(plan, std::move(words), "test words");
  return plan;
}

inline Deviation compare(const std::vector<uint16_t>& out, const std::vector<double>& ref) {
  return deviation(half_to_double(out), ref);
}

inline double max_abs_value(const std::vector<double>& x) {
  double m = 0.0;
  for (double v : x) m = std::max(m, std::fabs(v));
  return m;
}

// Spacing of FP16 values at magnitude x (for x in the normal range).
inline double half_ulp(double x) { return std::ldexp(1.0, std::ilogb(std::max(x, 6.1e-5)) - 10); }

}  // namespace tilemix::testing
