#include <catch2/catch.hpp>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/config/experiment.hpp"
#include "core/decode/decode_case.hpp"
#include "core/quant.hpp"
#include "kernels/decode/plan.hpp"
#include "reference/decode_emulator.hpp"
#include "reference/exact.hpp"
#include "tests/reference/attention_fixtures.hpp"
#include "tests/reference/decode_fixtures.hpp"

using namespace tilemix;
using namespace tilemix::testing;

namespace {

constexpr float kLog2e = 1.44269504088896340736f;
constexpr float kLn2 = 0.69314718055994530942f;

// The decode routing plan of `layout` at `ratio` for shape s.
RoutingPlan decode_plan(const DecodeShape& s, LayoutKind layout, double ratio = 0.0) {
  RoutingRequest request;
  request.layout = layout;
  request.ratio = ratio;
  request.seed = 5;
  request.geometry = kDecodeGeometry;
  return make_plan(s.attention_shape(), request);
}

// Every legal group of the problem on INT8 (`one`) or FP16, keeping the problem's data.
RoutingPlan plan_with(const PreparedDecode& pd, LayoutKind layout, double ratio = 0.0) {
  return decode_plan(pd.shape, layout, ratio);
}

ExactResult exact_of(const PreparedDecode& pd) {
  return exact_attention(pd.shape.attention_shape(), {pd.q, pd.k_src, pd.v_src});
}

// Exact attention (double, full softmax) over the dequantized INT8 cache: what the cache stands for.
std::vector<double> dequantized_reference(const PreparedDecode& pd) {
  const DecodeShape& s = pd.shape;
  std::vector<float> k, v;
  dequantize_cache(pd.int8, k, v);
  const std::vector<int64_t> cu_q = prefix_sums(s.new_tokens), cu_k = prefix_sums(s.cache_len);
  std::vector<double> out(pd.q.size(), 0.0);
  const int group = s.hq / s.hk;
  for (int b = 0; b < s.batch(); ++b) {
    for (int h = 0; h < s.hq; ++h) {
      for (int64_t i = 0; i < s.new_tokens[b]; ++i) {
        const int64_t visible = visible_keys(i, s.new_tokens[b], s.cache_len[b], true);
        const size_t q_at = (static_cast<size_t>(cu_q[b] + i) * s.hq + h) * s.d;
        std::vector<double> score(static_cast<size_t>(visible));
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < visible; ++j) {
          const size_t k_at = (static_cast<size_t>(cu_k[b] + j) * s.hk + h / group) * s.d;
          double dot = 0.0;
          for (int c = 0; c < s.d; ++c) dot += static_cast<double>(half_to_float(pd.q[q_at + c])) * k[k_at + c];
          score[j] = dot * s.softmax_scale;
          m = std::max(m, score[j]);
        }
        double l = 0.0;
        for (int64_t j = 0; j < visible; ++j) {
          const double p = std::exp(score[j] - m);
          l += p;
          const size_t v_at = (static_cast<size_t>(cu_k[b] + j) * s.hk + h / group) * s.d;
          for (int c = 0; c < s.d; ++c) out[q_at + c] += p * v[v_at + c];
        }
        for (int c = 0; c < s.d; ++c) out[q_at + c] /= l;
      }
    }
  }
  return out;
}

double rel_l2(const DecodeResult& r, const std::vector<double>& ref) { return compare(r.o, ref).rel_l2; }

}  // namespace

TEST_CASE("decode emulator follows the documented rounding points", "[decode]") {
  // One sequence, one new token, two cached keys (both visible), one split.
  const int d = 64;
  const DecodeShape s = make_decode_shape(1, 1, d, {2}, {1}, 0.37f);
  std::vector<uint16_t> q(d, 0), k(2 * d, 0), v(2 * d, 0);
  const float qv[3] = {1.25f, -0.5f, 0.875f}, k0[3] = {0.75f, 2.0f, -1.5f}, k1[3] = {-0.25f, 1.5f, 3.0f};
  for (int c = 0; c < 3; ++c) {
    q[c] = float_to_half(qv[c]);
    k[c] = float_to_half(k0[c]);
    k[d + c] = float_to_half(k1[c]);
  }
  for (int c = 0; c < d; ++c) {
    v[c] = float_to_half(0.1f * static_cast<float>(c) - 1.0f);
    v[d + c] = float_to_half(0.3f - 0.05f * static_cast<float>(c));
  }
  const KvCacheLayout layout = make_cache_layout(1, d, {2});
  Int8KvCache int8 = make_int8_cache(layout);
  Fp16KvCache fp16 = make_fp16_cache(layout);
  append_tokens(int8, {2}, k, v);
  append_tokens(fp16, {2}, k, v);
  const DecodeSplitPlan splits = make_decode_split_plan(s, 132, 3);
  const RoutingPlan zero = decode_plan(s, LayoutKind::zero), one = decode_plan(s, LayoutKind::one, 1.0);
  const float scale_log2 = 0.37f * kLog2e;

  // One tile from the -inf state, then the one-split combine (weight exp2(0) = 1).
  const auto expect = [&](const DecodeResult& got, float s0, float s1, float v_scale, const std::vector<float>& vv) {
    const float m = std::max(s0, s1);
    const float p0 = std::exp2(s0 - m), p1 = std::exp2(s1 - m);
    const float alpha = std::exp2(-std::numeric_limits<float>::infinity() - m);
    const float l = 0.0f * alpha + (p0 + p1);
    const float p16_0 = round_to_half(p0 * v_scale), p16_1 = round_to_half(p1 * v_scale);
    const float w = std::exp2(m - m);
    for (int c = 0; c < d; ++c) {
      const double pv = static_cast<double>(p16_0 * vv[c]) + static_cast<double>(p16_1 * vv[d + c]);
      const float o = 0.0f * alpha + static_cast<float>(pv);
      REQUIRE(got.o[c] == float_to_half((0.0f + w * o) / (0.0f + w * l)));
    }
    REQUIRE(got.lse[0] == (m + std::log2(0.0f + w * l)) * kLn2);
  };
  std::vector<float> v_codes(2 * d), v_values(2 * d);
  for (int i = 0; i < 2 * d; ++i) {
    v_codes[i] = static_cast<float>(int8.v8[i]);
    v_values[i] = half_to_float(v[i]);
  }

  SECTION("INT8 cache, INT8 score path") {
    const QuantizedTensor q8 = quantize_blockwise(q, {0, 1}, 1, d, kBlockQ);
    float c0 = 0.0f, c1 = 0.0f;
    for (int c = 0; c < d; ++c) {
      c0 += static_cast<float>(q8.codes[c] * int8.k8[c]);
      c1 += static_cast<float>(q8.codes[c] * int8.k8[d + c]);
    }
    const float s0 = (c0 * (q8.scales[0] * scale_log2)) * int8.k_scale[0];
    const float s1 = (c1 * (q8.scales[0] * scale_log2)) * int8.k_scale[0];
    expect(emulate_decode_int8(s, q, int8, one, splits), s0, s1, int8.v_scale[0], v_codes);
  }
  SECTION("INT8 cache, FP16 score path on dequantized K8") {
    double a0 = 0.0, a1 = 0.0;
    for (int c = 0; c < d; ++c) {
      a0 += static_cast<double>(half_to_float(q[c]) * static_cast<float>(int8.k8[c]));
      a1 += static_cast<double>(half_to_float(q[c]) * static_cast<float>(int8.k8[d + c]));
    }
    const float s0 = static_cast<float>(a0) * (int8.k_scale[0] * scale_log2);
    const float s1 = static_cast<float>(a1) * (int8.k_scale[0] * scale_log2);
    expect(emulate_decode_int8(s, q, int8, zero, splits), s0, s1, int8.v_scale[0], v_codes);
  }
  SECTION("FP16 cache") {
    double a0 = 0.0, a1 = 0.0;
    for (int c = 0; c < 3; ++c) {
      a0 += static_cast<double>(qv[c] * k0[c]);
      a1 += static_cast<double>(qv[c] * k1[c]);
    }
    expect(emulate_decode_fp16(s, q, fp16, splits), static_cast<float>(a0) * scale_log2,
           static_cast<float>(a1) * scale_log2, 1.0f, v_values);
  }
}

TEST_CASE("decode: the lazy reference keeps FP16 P finite at the largest V", "[decode]") {
  // One new token, 128 cached keys (two tiles) with V at +-65504, so the INT8 block scale of V is
  // 65504 / 127. Key 64 scores `jump` (log2 units) above key 0, the first tile's maximum: below
  // kDecodeRescaleLog2 the reference stays and tile 2's largest p * v_scale is 2^jump * 515.8;
  // above it the reference moves. Both stay finite only while the threshold is at most ~6.99.
  const int d = 64;
  const DecodeShape s = make_decode_shape(1, 1, d, {128}, {1}, 1.0f);
  const RoutingPlan zero = decode_plan(s, LayoutKind::zero), one = decode_plan(s, LayoutKind::one, 1.0);
  const DecodeSplitPlan splits = fixed_decode_split_plan(s, 2);
  for (float jump : {kDecodeRescaleLog2 - 0.25f, kDecodeRescaleLog2 + 1.5f}) {
    std::vector<uint16_t> q(d, 0), k(128 * d, 0), v(128 * d, 0);
    q[0] = float_to_half(1.0f);
    k[0] = float_to_half(2.0f);
    k[64 * d] = float_to_half(2.0f + jump / kLog2e);
    for (int t = 0; t < 128; ++t) {
      for (int c = 0; c < d; ++c) v[t * d + c] = float_to_half((t + c) % 3 == 0 ? -65504.0f : 65504.0f);
    }
    const KvCacheLayout layout = make_cache_layout(1, d, {128});
    Int8KvCache int8 = make_int8_cache(layout);
    Fp16KvCache fp16 = make_fp16_cache(layout);
    append_tokens(int8, {128}, k, v);
    append_tokens(fp16, {128}, k, v);
    // Exact attention over the FP16 tokens, in double.
    std::vector<double> expected(d, 0.0), p(128);
    double m = -std::numeric_limits<double>::infinity(), l = 0.0;
    for (int t = 0; t < 128; ++t) m = std::max(m, static_cast<double>(half_to_float(k[t * d])));
    for (int t = 0; t < 128; ++t) l += p[t] = std::exp(static_cast<double>(half_to_float(k[t * d])) - m);
    for (int t = 0; t < 128; ++t) {
      for (int c = 0; c < d; ++c) expected[c] += p[t] / l * half_to_float(v[t * d + c]);
    }
    const std::pair<const char*, DecodeResult> runs[] = {
        {"int8 zero", emulate_decode_int8(s, q, int8, zero, splits)},
        {"int8 one", emulate_decode_int8(s, q, int8, one, splits)},
        {"fp16", emulate_decode_fp16(s, q, fp16, splits)}};
    for (const auto& [name, got] : runs) {
      INFO(name << ", jump " << jump);
      const Deviation dev = compare(got.o, expected);
      CHECK(dev.nonfinite == 0);
      CHECK(dev.rel_l2 < 1e-2);
    }
  }
}

TEST_CASE("decode: under the lazy reference a key far below a later maximum keeps its FP16 P", "[decode]") {
  // One new token, 128 keys, Q = e_0 with softmax_scale 1, so a key's score is 1.4427 * k[0] in
  // log2 units. Keys score 0 but key 64 (5.9: within kDecodeRescaleLog2 of tile 1's maximum, so the
  // reference stays 0) and key 65 (-16.4); only key 65 has a value (V[65][0] = 127). Under the lazy
  // reference p_65 = 2^-16.4, 194 FP16 subnormal steps; measured against the exact maximum (5.9) it
  // would be 2^-22.3, 3.2 steps rounded to 3, and o[0] off by 7%.
  const int d = 64;
  const DecodeShape s = make_decode_shape(1, 1, d, {128}, {1}, 1.0f);
  std::vector<uint16_t> q(d, 0), k(128 * d, 0), v(128 * d, 0);
  q[0] = float_to_half(1.0f);
  k[64 * d] = float_to_half(5.9f / kLog2e);
  k[65 * d] = float_to_half(-16.4f / kLog2e);
  v[65 * d] = float_to_half(127.0f);
  const KvCacheLayout layout = make_cache_layout(1, d, {128});
  Int8KvCache int8 = make_int8_cache(layout);
  Fp16KvCache fp16 = make_fp16_cache(layout);
  append_tokens(int8, {128}, k, v);
  append_tokens(fp16, {128}, k, v);
  const RoutingPlan zero = decode_plan(s, LayoutKind::zero);
  const DecodeSplitPlan splits = fixed_decode_split_plan(s, 2);
  // Exact attention over the FP16 tokens: o[0] = p_65 * 127 / l.
  double m = -std::numeric_limits<double>::infinity(), l = 0.0;
  for (int t = 0; t < 128; ++t) m = std::max(m, static_cast<double>(half_to_float(k[t * d])));
  for (int t = 0; t < 128; ++t) l += std::exp(static_cast<double>(half_to_float(k[t * d])) - m);
  const double expected = std::exp(static_cast<double>(half_to_float(k[65 * d])) - m) * 127.0 / l;
  const std::pair<const char*, DecodeResult> runs[] = {{"int8 cache", emulate_decode_int8(s, q, int8, zero, splits)},
                                                       {"fp16 cache", emulate_decode_fp16(s, q, fp16, splits)}};
  for (const auto& [name, got] : runs) {
    const double o0 = half_to_float(got.o[0]);
    INFO(name << ": o[0] = " << o0 << ", exact " << expected);
    CHECK(std::fabs(o0 - expected) < 0.02 * expected);
  }
}

TEST_CASE("decode emulator over the FP16 cache is exact up to FP16 rounding", "[decode]") {
  for (InputKind input : {InputKind::gaussian, InputKind::llm_like}) {
    const DecodeProblem p = make_problem(8, 2, 128, {1, 63, 64, 65, 1500}, {1, 4, 16, 16, 4}, LayoutKind::zero, 0.0,
                                         input, 3);
    const DecodeSplitPlan splits = make_decode_split_plan(p.pd.shape, 132, 3);
    const DecodeResult emu = emulate_decode_fp16(p.pd.shape, p.pd.q, p.pd.fp16, splits);
    const ExactResult ref = exact_of(p.pd);
    const Deviation dev = compare(emu.o, ref.o);
    CHECK(dev.nonfinite == 0);
    CHECK(dev.rel_l2 < 1e-3);
    CHECK(dev.max_abs <= 2.0 * half_ulp(max_abs_value(ref.o)));
    for (size_t i = 0; i < ref.lse.size(); ++i) REQUIRE(std::fabs(emu.lse[i] - ref.lse[i]) < 1e-4);
  }
}

TEST_CASE("INT8 cache: zero routing carries only the cache's INT8 error, routing adds to it", "[decode]") {
  const DecodeProblem p =
      make_problem(8, 2, 128, {1, 63, 64, 65, 2000}, {1, 4, 16, 16, 8}, LayoutKind::zero, 0.0, InputKind::gaussian, 4);
  const PreparedDecode& pd = p.pd;
  const DecodeSplitPlan splits = make_decode_split_plan(pd.shape, 132, 3);
  const std::vector<double> dequantized = dequantized_reference(pd);
  const ExactResult exact = exact_of(pd);
  const double cache_error = deviation(dequantized, exact.o).rel_l2;

  const DecodeResult zero = emulate_decode_int8(pd.shape, pd.q, pd.int8, pd.plan, splits);
  // Against what the cache stands for, only FP16 rounding (of P and of the output) remains.
  CHECK(rel_l2(zero, dequantized) < 1e-3);
  const double zero_error = rel_l2(zero, exact.o);
  CHECK(zero_error < cache_error * 1.05 + 1e-3);
  CHECK(zero_error > cache_error * 0.95 - 1e-3);

  // The INT8 score path also quantizes Q: a little more error, not a different scale of it.
  const DecodeResult one = emulate_decode_int8(pd.shape, pd.q, pd.int8, plan_with(pd, LayoutKind::one), splits);
  const double one_error = rel_l2(one, exact.o);
  CHECK(one_error > zero_error);
  CHECK(one_error < 2.0 * zero_error);
  CHECK(rel_l2(one, dequantized) > 2.0 * rel_l2(zero, dequantized));
}

TEST_CASE("INT8 cache: the routing error grows with INT8 coverage", "[decode]") {
  const DecodeProblem p =
      make_problem(8, 2, 128, {3000, 700}, {4, 16}, LayoutKind::zero, 0.0, InputKind::gaussian, 6);
  const PreparedDecode& pd = p.pd;
  const DecodeSplitPlan splits = make_decode_split_plan(pd.shape, 132, 3);
  const std::vector<double> dequantized = dequantized_reference(pd);
  double previous = 0.0;
  for (double ratio : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    const RoutingPlan plan = plan_with(pd, LayoutKind::rowrand, ratio);
    const double error = rel_l2(emulate_decode_int8(pd.shape, pd.q, pd.int8, plan, splits), dequantized);
    INFO("ratio " << ratio << " coverage " << plan.coverage.groups() << " rel_l2 vs dequantized cache " << error);
    CHECK(error > previous);
    previous = error;
  }
}

TEST_CASE("decode emulator: GQA 1/4/8, 1/4/16 new tokens, caches of 1, 63, 64, 65 tokens", "[decode]") {
  uint64_t seed = 100;
  for (int group : {1, 4, 8}) {
    for (int64_t n : {1, 4, 16}) {
      const std::vector<int64_t> cache_len{1, 63, 64, 65, 400};
      std::vector<int64_t> new_tokens;
      for (int64_t len : cache_len) new_tokens.push_back(std::min(n, len));
      const int hk = group == 8 ? 1 : 2;
      const DecodeProblem p = make_problem(group * hk, hk, 64, cache_len, new_tokens, LayoutKind::band, 0.5,
                                           InputKind::gaussian, ++seed);
      const PreparedDecode& pd = p.pd;
      const DecodeSplitPlan splits = make_decode_split_plan(pd.shape, 132, 3, 1);
      const ExactResult exact = exact_of(pd);
      INFO("group " << group << " new tokens " << n);
      const DecodeResult fp16 = emulate_decode_fp16(pd.shape, pd.q, pd.fp16, splits);
      CHECK(compare(fp16.o, exact.o).rel_l2 < 1e-3);
      const Deviation int8 = compare(emulate_decode_int8(pd.shape, pd.q, pd.int8, pd.plan, splits).o, exact.o);
      CHECK(int8.nonfinite == 0);
      CHECK(int8.rel_l2 < 0.025);
      CHECK(int8.cosine > 0.9997);
    }
  }
}

TEST_CASE("decode emulator is deterministic and fast at a few thousand cached tokens", "[decode]") {
  const DecodeProblem p =
      make_problem(8, 2, 128, {4096, 4096, 4096, 4096}, {16, 16, 16, 16}, LayoutKind::band, 0.5,
                   InputKind::gaussian, 8);
  const PreparedDecode& pd = p.pd;
  const DecodeSplitPlan splits = make_decode_split_plan(pd.shape, 132, 3);
  const auto t0 = std::chrono::steady_clock::now();
  const DecodeResult a = emulate_decode_int8(pd.shape, pd.q, pd.int8, pd.plan, splits);
  const double int8_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto t1 = std::chrono::steady_clock::now();
  emulate_decode_fp16(pd.shape, pd.q, pd.fp16, splits);
  const double fp16_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  INFO("B=4 hq=8 L=4096 n=16: INT8 cache " << int8_seconds << " s, FP16 cache " << fp16_seconds << " s");
#ifndef TILEMIX_SANITIZED  // the sanitized build runs several times slower
  CHECK(int8_seconds < 1.0);
  CHECK(fp16_seconds < 1.0);
#endif

  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const DecodeResult serial = emulate_decode_int8(pd.shape, pd.q, pd.int8, pd.plan, splits);
  omp_set_num_threads(threads);
  CHECK(serial.o == a.o);
  CHECK(serial.lse == a.lse);
}
