#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/inputs/inputs.hpp"
#include "core/quant.hpp"
#include "reference/emulator.hpp"
#include "reference/exact.hpp"
#include "tests/reference/attention_fixtures.hpp"

using namespace tilemix;
using namespace tilemix::testing;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

EmulatorOptions options_with(StatePrecision state, AccumPrecision accum, QuantMode mode = QuantMode::quantize_once,
                             KeyOrder order = KeyOrder::ascending) {
  EmulatorOptions o;
  o.numerics.state = state;
  o.numerics.accum = accum;
  o.numerics.mode = mode;
  o.key_order = order;
  return o;
}

const EmulatorOptions kDefault = options_with(StatePrecision::fp32, AccumPrecision::fp32);

// Alternating INT8 / FP16 groups, so paths switch inside every query-tile row.
RoutingPlan checkerboard_plan(const AttentionShape& s, TileGeometry geometry) {
  return masked_plan(uniform_plan(s, geometry, true), [](int h, int, int m) {
    return (m + h) % 2 ? 0x5555555555555555ull : 0xaaaaaaaaaaaaaaaaull;
  });
}

// Rows with no legal key give o = 0 and lse = -inf; every other lse is finite and close to exact.
void check_rows(const AttentionShape& s, const EmulatorResult& emu, const ExactResult& ref, double lse_tol) {
  for (int h = 0; h < s.hq; ++h) {
    for (int64_t t = 0; t < s.total_q(); ++t) {
      const double want = ref.lse[h * s.total_q() + t];
      const float got = emu.lse[h * s.total_q() + t];
      if (std::isinf(want)) {
        REQUIRE(got == -kInf);
        for (int c = 0; c < s.d; ++c) REQUIRE(emu.o[(t * s.hq + h) * s.d + c] == 0);
      } else {
        REQUIRE(std::isfinite(got));
        REQUIRE(std::fabs(got - want) < lse_tol);
      }
    }
  }
}

}  // namespace

TEST_CASE("emulator follows the documented rounding points", "[emulator]") {
  // One query, two keys in one key tile: the whole computation is one tile step.
  const AttentionShape s = make_shape(1, 1, 64, false, {1}, {2}, 0.37f);
  AttentionInputs in;
  in.q.assign(64, 0);
  in.k.assign(2 * 64, 0);
  in.v.assign(2 * 64, 0);
  const float q[3] = {1.25f, -0.5f, 0.875f}, k0[3] = {0.75f, 2.0f, -1.5f}, k1[3] = {-0.25f, 1.5f, 3.0f};
  for (int c = 0; c < 3; ++c) {
    in.q[c] = float_to_half(q[c]);
    in.k[c] = float_to_half(k0[c]);
    in.k[64 + c] = float_to_half(k1[c]);
  }
  for (int c = 0; c < 64; ++c) {
    in.v[c] = float_to_half(0.1f * static_cast<float>(c) - 1.0f);
    in.v[64 + c] = float_to_half(0.3f - 0.05f * static_cast<float>(c));
  }
  const float scale_log2 = 0.37f * 1.44269504088896340736f;

  // p from s - m, or with the scale folded into the exponent from fma(raw, scale, -m).
  auto expect_p = [&](float s0, float s1, float scale, bool fused) {
    const float m = fused ? std::max(s0 * scale, s1 * scale) : std::max(s0, s1);
    const float p0 = fused ? std::exp2(std::fma(s0, scale, -m)) : std::exp2(s0 - m);
    const float p1 = fused ? std::exp2(std::fma(s1, scale, -m)) : std::exp2(s1 - m);
    const float l = p0 + p1;
    EmulatorResult r;
    for (int c = 0; c < 64; ++c) {
      float o = 0.0f;
      o += round_to_half(p0) * half_to_float(in.v[c]);
      o += round_to_half(p1) * half_to_float(in.v[64 + c]);
      r.o.push_back(float_to_half(o / l));
    }
    r.lse.push_back((m + std::log2(l)) * 0.69314718055994530942f);
    return r;
  };
  auto expect = [&](float s0, float s1) { return expect_p(s0, s1, 1.0f, false); };
  EmulatorOptions fused = kDefault;
  fused.fused_score_scale = true;

  SECTION("FP16 path") {
    double dot0 = 0, dot1 = 0;
    for (int c = 0; c < 3; ++c) {
      dot0 += static_cast<double>(q[c]) * k0[c];
      dot1 += static_cast<double>(q[c]) * k1[c];
    }
    const EmulatorResult want = expect(static_cast<float>(dot0) * scale_log2, static_cast<float>(dot1) * scale_log2);
    const EmulatorResult got = emulate_attention(s, in, uniform_plan(s, TileGeometry{64, 64}, false), kDefault);
    CHECK(got.o == want.o);
    CHECK(got.lse == want.lse);
    const EmulatorResult want_fused = expect_p(static_cast<float>(dot0), static_cast<float>(dot1), scale_log2, true);
    const EmulatorResult got_fused = emulate_attention(s, in, uniform_plan(s, TileGeometry{64, 64}, false), fused);
    CHECK(got_fused.o == want_fused.o);
    CHECK(got_fused.lse == want_fused.lse);
  }
  SECTION("INT8 path") {
    const QuantizedTensor q8 = quantize_blockwise(in.q, s.cu_seqlens_q, 1, 64, kBlockQ);
    const QuantizedTensor k8 = quantize_blockwise(in.k, s.cu_seqlens_k, 1, 64, kBlockK);
    int32_t c0 = 0, c1 = 0;
    for (int c = 0; c < 64; ++c) {
      c0 += q8.codes[c] * k8.codes[c];
      c1 += q8.codes[c] * k8.codes[64 + c];
    }
    const float sq = q8.scales[0] * scale_log2, sk = k8.scales[0];
    const EmulatorResult want = expect((static_cast<float>(c0) * sq) * sk, (static_cast<float>(c1) * sq) * sk);
    const EmulatorResult got = emulate_attention(s, in, uniform_plan(s, TileGeometry{64, 64}, true), kDefault);
    CHECK(got.o == want.o);
    CHECK(got.lse == want.lse);
    const EmulatorResult want_fused = expect_p(static_cast<float>(c0), static_cast<float>(c1), sq * sk, true);
    const EmulatorResult got_fused = emulate_attention(s, in, uniform_plan(s, TileGeometry{64, 64}, true), fused);
    CHECK(got_fused.o == want_fused.o);
    CHECK(got_fused.lse == want_fused.lse);
  }

  // smooth_k: kbar = (k0 + k1) / 2 = (0.25, 1.75, 0.75); Ks = +-(0.5, 0.25, -2.25), exact in FP16;
  // q . kbar = 0.3125 - 0.875 + 0.65625.
  const float ks0[3] = {0.5f, 0.25f, -2.25f}, ks1[3] = {-0.5f, -0.25f, 2.25f};
  const float qkbar = 0.09375f;
  EmulatorOptions smooth = kDefault, smooth_fused = fused;
  smooth.numerics.smooth_k = smooth_fused.numerics.smooth_k = true;
  // The LSE of the smoothed scores plus fp32(qkbar * softmax_scale).
  const auto unsmoothed = [&](EmulatorResult r) {
    const float shift = qkbar * 0.37f;
    r.lse[0] = r.lse[0] + shift;
    return r;
  };
  SECTION("smooth_k: Ks, q . kbar") {
    const SmoothedKeys sk = smooth_keys(s, in.q, in.k);
    REQUIRE(sk.qkbar.at(0) == qkbar);
    for (int c = 0; c < 3; ++c) {
      CHECK(sk.ks[c] == float_to_half(ks0[c]));
      CHECK(sk.ks[64 + c] == float_to_half(ks1[c]));
    }
  }
  SECTION("FP16 path with smooth_k: the FP16 path on Ks") {
    double dot0 = 0, dot1 = 0;
    for (int c = 0; c < 3; ++c) {
      dot0 += static_cast<double>(q[c]) * ks0[c];
      dot1 += static_cast<double>(q[c]) * ks1[c];
    }
    const float raw0 = static_cast<float>(dot0), raw1 = static_cast<float>(dot1);
    const EmulatorResult want = unsmoothed(expect(raw0 * scale_log2, raw1 * scale_log2));
    const EmulatorResult got = emulate_attention(s, in, uniform_plan(s, TileGeometry{64, 64}, false), smooth);
    CHECK(got.o == want.o);
    CHECK(got.lse == want.lse);
    const EmulatorResult want_fused = unsmoothed(expect_p(raw0, raw1, scale_log2, true));
    const EmulatorResult got_fused =
        emulate_attention(s, in, uniform_plan(s, TileGeometry{64, 64}, false), smooth_fused);
    CHECK(got_fused.o == want_fused.o);
    CHECK(got_fused.lse == want_fused.lse);
  }
  SECTION("INT8 path with smooth_k: the codes and scale of Ks, Q's as before") {
    const QuantizedTensor q8 = quantize_blockwise(in.q, s.cu_seqlens_q, 1, 64, kBlockQ);
    const QuantizedTensor k8 = quantize_blockwise(smooth_keys(s, in.q, in.k).ks, s.cu_seqlens_k, 1, 64, kBlockK);
    // Ks = +-(0.5, 0.25, -2.25): absmax 2.25.
    REQUIRE(k8.scales[0] == 2.25f / 127.0f);
    int32_t c0 = 0, c1 = 0;
    for (int c = 0; c < 64; ++c) {
      c0 += q8.codes[c] * k8.codes[c];
      c1 += q8.codes[c] * k8.codes[64 + c];
    }
    REQUIRE(c0 == -c1);
    const float sq = q8.scales[0] * scale_log2, sk = k8.scales[0];
    const EmulatorResult want =
        unsmoothed(expect((static_cast<float>(c0) * sq) * sk, (static_cast<float>(c1) * sq) * sk));
    const EmulatorResult got = emulate_attention(s, in, uniform_plan(s, TileGeometry{64, 64}, true), smooth);
    CHECK(got.o == want.o);
    CHECK(got.lse == want.lse);
    const EmulatorResult want_fused =
        unsmoothed(expect_p(static_cast<float>(c0), static_cast<float>(c1), sq * sk, true));
    const EmulatorResult got_fused = emulate_attention(s, in, uniform_plan(s, TileGeometry{64, 64}, true), smooth_fused);
    CHECK(got_fused.o == want_fused.o);
    CHECK(got_fused.lse == want_fused.lse);
  }
}

TEST_CASE("emulator: smooth_k is the unsmoothed emulator on Ks with the LSE shifted back", "[emulator]") {
  // Both paths read Ks in place of K, so an unsmoothed run on inputs whose keys are Ks gives the
  // smoothed run's outputs bit for bit, and its LSE short of fp32(q . kbar * scale) (rows without
  // keys stay -inf). Ks is not K - kbar: its FP16 rounding is part of the contract.
  const AttentionShape s = make_shape(6, 2, 64, true, {300, 1, 0, 77, 130}, {300, 1, 0, 140, 100});
  InputSpec spec;
  spec.kind = InputKind::llm_like;
  spec.seed = 17;
  spec.k_channel_bias = 8.0f;
  const AttentionInputs in = make_inputs(s, spec);
  const SmoothedKeys sk = smooth_keys(s, in.q, in.k);
  int64_t inexact = 0;
  for (int b = 0; b < s.batch(); ++b) {
    for (int64_t t = s.cu_seqlens_k[b]; t < s.cu_seqlens_k[b + 1]; ++t) {
      for (int h = 0; h < s.hk; ++h) {
        for (int c = 0; c < s.d; ++c) {
          const size_t i = (t * s.hk + h) * s.d + c;
          inexact += half_to_float(sk.ks[i]) != half_to_float(in.k[i]) - sk.kbar[(b * s.hk + h) * s.d + c];
        }
      }
    }
  }
  REQUIRE(inexact > static_cast<int64_t>(sk.ks.size() / 2));
  AttentionInputs on_ks = in;
  on_ks.k = sk.ks;
  const RoutingPlan plans[] = {uniform_plan(s, TileGeometry{128, 64}, false), checkerboard_plan(s, {128, 64})};
  for (const RoutingPlan& plan : plans) {
    for (StatePrecision state : {StatePrecision::fp32, StatePrecision::fp16}) {
      for (const bool fused : {false, true}) {
        EmulatorOptions plain = options_with(state, AccumPrecision::fp32);
        plain.fused_score_scale = fused;
        EmulatorOptions smooth = plain;
        smooth.numerics.smooth_k = true;
        const EmulatorResult got = emulate_attention(s, in, plan, smooth);
        EmulatorResult want = emulate_attention(s, on_ks, plan, plain);
        for (int h = 0; h < s.hq; ++h) {
          for (int64_t t = 0; t < s.total_q(); ++t) {
            float& lse = want.lse[h * s.total_q() + t];
            if (lse != -kInf) lse = unsmoothed_lse(lse, sk.qkbar[t * s.hq + h], s.softmax_scale);
          }
        }
        INFO((&plan == plans ? "every tile FP16" : "checkerboard") << " state " << to_string(state) << " fused " << fused);
        CHECK(got.o == want.o);
        CHECK(got.lse == want.lse);
      }
    }
  }
}

TEST_CASE("emulator: zero layout is within FP16 rounding of exact, one layout within INT8 error", "[emulator]") {
  const AttentionShape s = make_shape(4, 2, 128, true, {512}, {512});
  const TileGeometry geo{128, 64};
  for (const InputKind kind : {InputKind::gaussian, InputKind::llm_like}) {
    const AttentionInputs in = seeded_inputs(s, 7, kind);
    const ExactResult ref = exact_attention(s, in);
    const double ref_max = max_abs_value(ref.o);

    const EmulatorResult zero = emulate_attention(s, in, uniform_plan(s, geo, false), kDefault);
    const Deviation zc = compare(zero.o, ref.o);
    INFO(to_string(kind) << " zero: rel_l2 " << zc.rel_l2 << " max_abs " << zc.max_abs << " (ref max " << ref_max
                         << ")");
    CHECK(zc.nonfinite == 0);
    CHECK(zc.rel_l2 < 1e-3);
    CHECK(zc.max_abs <= 4 * half_ulp(ref_max));
    check_rows(s, zero, ref, 1e-4);

    const EmulatorResult one = emulate_attention(s, in, uniform_plan(s, geo, true), kDefault);
    const Deviation oc = compare(one.o, ref.o);
    INFO(to_string(kind) << " one: rel_l2 " << oc.rel_l2 << " max_abs " << oc.max_abs);
    CHECK(oc.nonfinite == 0);
    CHECK(oc.rel_l2 > 2 * zc.rel_l2);
    // llm_like's outlier channels and sink key widen the K scales: coarser codes, larger error.
    const bool gaussian = kind == InputKind::gaussian;
    CHECK(oc.rel_l2 < (gaussian ? 0.05 : 0.1));
    check_rows(s, one, ref, gaussian ? 0.1 : 1.0);
  }
}

TEST_CASE("emulator: mean error grows with INT8 coverage for every layout", "[emulator]") {
  const std::vector<double> ratios = {0.0, 0.25, 0.5, 0.75, 1.0};
  for (const bool causal : {true, false}) {
    const AttentionShape s = make_shape(2, 1, 128, causal, {1024}, {1024});
    const AttentionInputs in = seeded_inputs(s, 23);
    const ExactResult ref = exact_attention(s, in);
    for (LayoutKind layout : generated_layouts()) {
      if (layout == LayoutKind::zero || layout == LayoutKind::one) continue;
      std::string trace;
      double previous_error = -1.0, previous_cells = -1.0, first_error = 0.0;
      for (double ratio : ratios) {
        const RoutingPlan plan = layout_plan(s, TileGeometry{128, 64}, layout, ratio);
        const double error = compare(emulate_attention(s, in, plan, kDefault).o, ref.o).mean_abs;
        const double cells = plan.coverage.cells();
        trace += " " + std::to_string(ratio) + " (groups " + std::to_string(plan.coverage.groups()) + ", cells " +
                 std::to_string(cells) + "): " + std::to_string(error) + ";";
        INFO(to_string(layout) << " causal " << causal << ":" << trace);
        // A layout whose grid cannot reach a ratio repeats its closest map; only real growth counts.
        if (cells > previous_cells) CHECK(error > previous_error);
        if (ratio == 0.0) first_error = error;
        if (ratio == 1.0) CHECK(error > 2 * first_error);
        previous_error = error;
        previous_cells = cells;
      }
    }
  }
}

TEST_CASE("emulator: quantize_once and on_the_fly give bit-identical outputs", "[emulator]") {
  const AttentionShape s = make_shape(6, 2, 64, true, {300, 1, 0, 77}, {300, 1, 0, 140});
  InputSpec spec;
  spec.kind = InputKind::llm_like;
  spec.seed = 11;
  spec.k_channel_bias = 8.0f;
  const AttentionInputs in = make_inputs(s, spec);
  for (const RoutingPlan& plan : {uniform_plan(s, {128, 64}, true), checkerboard_plan(s, {64, 64})}) {
    for (StatePrecision state : {StatePrecision::fp32, StatePrecision::fp16}) {
      // With smooth_k both modes take the same Ks, its codes and q . kbar.
      for (const bool smooth : {false, true}) {
        EmulatorOptions once_options = options_with(state, AccumPrecision::fp32, QuantMode::quantize_once);
        EmulatorOptions fly_options = options_with(state, AccumPrecision::fp32, QuantMode::on_the_fly);
        once_options.numerics.smooth_k = fly_options.numerics.smooth_k = smooth;
        const EmulatorResult once = emulate_attention(s, in, plan, once_options);
        const EmulatorResult fly = emulate_attention(s, in, plan, fly_options);
        INFO("smooth_k " << smooth << " state " << to_string(state));
        CHECK(once.o == fly.o);
        CHECK(once.lse == fly.lse);
      }
    }
  }
}

TEST_CASE("emulator: fp16 state and fp16 accumulation stay close to fp32 state", "[emulator]") {
  const AttentionShape s = make_shape(4, 1, 128, true, {384}, {384});
  const AttentionInputs in = seeded_inputs(s, 13);
  const ExactResult ref = exact_attention(s, in);
  const TileGeometry geo{128, 64};
  for (const bool int8 : {false, true}) {
    const RoutingPlan plan = uniform_plan(s, geo, int8);
    const EmulatorResult base = emulate_attention(s, in, plan, kDefault);
    const double base_err = compare(base.o, ref.o).rel_l2;
    for (const auto& [state, accum] : {std::pair{StatePrecision::fp16, AccumPrecision::fp32},
                                       std::pair{StatePrecision::fp32, AccumPrecision::fp16},
                                       std::pair{StatePrecision::fp16, AccumPrecision::fp16}}) {
      const EmulatorResult r = emulate_attention(s, in, plan, options_with(state, accum));
      const Deviation vs_base = compare(r.o, half_to_double(base.o));
      const Deviation vs_ref = compare(r.o, ref.o);
      INFO("int8 " << int8 << " state " << to_string(state) << " accum " << to_string(accum) << ": vs fp32 state "
                   << vs_base.rel_l2 << ", vs exact " << vs_ref.rel_l2 << " (fp32 state " << base_err << ")");
      CHECK(vs_ref.nonfinite == 0);
      CHECK(vs_base.rel_l2 < 5e-3);
      CHECK(vs_ref.rel_l2 < base_err + 5e-3);
      check_rows(s, r, ref, int8 ? 0.1 : 1e-2);
    }
  }
}

TEST_CASE("emulator: ascending and descending key order both match exact", "[emulator]") {
  const AttentionShape s = make_shape(4, 2, 64, false, {200}, {333});
  const AttentionInputs in = seeded_inputs(s, 19);
  const ExactResult ref = exact_attention(s, in);
  for (const bool int8 : {false, true}) {
    const RoutingPlan plan = uniform_plan(s, TileGeometry{64, 64}, int8);
    for (KeyOrder order : {KeyOrder::ascending, KeyOrder::descending}) {
      for (StatePrecision state : {StatePrecision::fp32, StatePrecision::fp16}) {
        const EmulatorResult r =
            emulate_attention(s, in, plan, options_with(state, AccumPrecision::fp32, QuantMode::quantize_once, order));
        const Deviation c = compare(r.o, ref.o);
        INFO("int8 " << int8 << " descending " << (order == KeyOrder::descending) << " state " << to_string(state)
                     << ": rel_l2 " << c.rel_l2);
        CHECK(c.nonfinite == 0);
        CHECK(c.rel_l2 < (int8 ? 0.05 : 2e-3));
      }
    }
  }
}

TEST_CASE("emulator: awkward shapes, varlen, GQA, head dims, causal and not, geometries", "[emulator]") {
  struct Case {
    int hq, hk, d;
    bool causal;
    std::vector<int64_t> lq, lk;
  };
  const std::vector<Case> cases = {
      {2, 2, 64, true, {300}, {300}},
      {3, 1, 128, true, {77}, {77}},
      {8, 1, 64, false, {77}, {300}},
      {3, 1, 64, true, {77}, {300}},                      // Lq < Lk
      {2, 2, 128, true, {300}, {77}},                     // Lq > Lk: early rows see no key
      {6, 2, 64, true, {130, 1, 0, 77}, {130, 1, 0, 200}},  // varlen with length-1 and zero-length
      {8, 1, 128, false, {1, 200, 0}, {9, 200, 5}},
  };
  const std::vector<TileGeometry> geometries = {{64, 64}, {128, 64}, {128, 128}};
  uint64_t seed = 100;
  for (const Case& c : cases) {
    const AttentionShape s = make_shape(c.hq, c.hk, c.d, c.causal, c.lq, c.lk);
    const AttentionInputs in = seeded_inputs(s, ++seed);
    const ExactResult ref = exact_attention(s, in);
    for (const TileGeometry geo : geometries) {
      for (int route = 0; route < 3; ++route) {
        const RoutingPlan plan = route == 2 ? checkerboard_plan(s, geo) : uniform_plan(s, geo, route == 1);
        for (StatePrecision state : {StatePrecision::fp32, StatePrecision::fp16}) {
          const EmulatorResult r = emulate_attention(s, in, plan, options_with(state, AccumPrecision::fp32));
          const Deviation cmp = compare(r.o, ref.o);
          INFO("hq " << c.hq << " hk " << c.hk << " d " << c.d << " causal " << c.causal << " geometry "
                     << geo.block_m << "x" << geo.block_n << " route " << route << " state " << to_string(state)
                     << ": rel_l2 " << cmp.rel_l2);
          REQUIRE(r.o.size() == ref.o.size());
          CHECK(cmp.nonfinite == 0);
          CHECK(cmp.rel_l2 < (route == 0 ? 2e-3 : 0.05));
          for (float x : r.lse) CHECK(!std::isnan(x));
          check_rows(s, r, ref, route == 0 ? 1e-2 : 0.1);
        }
      }
    }
  }
}

TEST_CASE("emulator: softmax steps of two key tiles", "[emulator]") {
  // The kernel with 128-key steps (prefill v3) updates the state once per two 64-key tiles: the
  // same function up to fp32 rounding of the rescales, exactly the same where a row has one tile.
  const TileGeometry geo{128, 64};
  const auto with_steps = [](StatePrecision state, int tiles) {
    EmulatorOptions o = options_with(state, AccumPrecision::fp32);
    o.softmax_tiles = tiles;
    return o;
  };
  SECTION("rows of one key tile: bit-identical") {
    const AttentionShape s = make_shape(3, 1, 128, false, {200}, {64});
    const AttentionInputs in = seeded_inputs(s, 71);
    const RoutingPlan plan = checkerboard_plan(s, geo);
    for (StatePrecision state : {StatePrecision::fp32, StatePrecision::fp16}) {
      const EmulatorResult one = emulate_attention(s, in, plan, with_steps(state, 1));
      const EmulatorResult two = emulate_attention(s, in, plan, with_steps(state, 2));
      CHECK(one.o == two.o);
      CHECK(one.lse == two.lse);
    }
  }
  SECTION("longer rows: within rounding, not the same bits, as accurate") {
    // Causal varlen with an odd tile count (a last step of one tile) and Lq < Lk.
    const AttentionShape s = make_shape(4, 2, 128, true, {333, 70}, {1000, 129});
    const AttentionInputs in = seeded_inputs(s, 72);
    const ExactResult ref = exact_attention(s, in);
    for (const bool mixed : {false, true}) {
      const RoutingPlan plan = mixed ? checkerboard_plan(s, geo) : uniform_plan(s, geo, false);
      for (StatePrecision state : {StatePrecision::fp32, StatePrecision::fp16}) {
        const EmulatorResult one = emulate_attention(s, in, plan, with_steps(state, 1));
        const EmulatorResult two = emulate_attention(s, in, plan, with_steps(state, 2));
        std::vector<double> one_o(one.o.size());
        for (size_t i = 0; i < one.o.size(); ++i) one_o[i] = half_to_float(one.o[i]);
        const Deviation between = compare(two.o, one_o);
        INFO("mixed " << mixed << " state " << to_string(state) << ": rel_l2 between steps " << between.rel_l2);
        CHECK(between.nonfinite == 0);
        CHECK(between.rel_l2 < (state == StatePrecision::fp16 ? 2e-3 : 2e-4));
        CHECK(one.o != two.o);
        CHECK(compare(two.o, ref.o).rel_l2 <= 1.1 * compare(one.o, ref.o).rel_l2 + 1e-4);
        check_rows(s, two, ref, mixed ? 0.1 : 1e-2);
      }
    }
  }
  SECTION("steps outside [1, 64] are refused") {
    const AttentionShape s = make_shape(1, 1, 64, false, {10}, {10});
    const AttentionInputs in = seeded_inputs(s, 73);
    const RoutingPlan plan = uniform_plan(s, geo, false);
    CHECK_THROWS_WITH(emulate_attention(s, in, plan, with_steps(StatePrecision::fp32, 0)),
                      Catch::Contains("softmax_tiles"));
  }
}

TEST_CASE("emulator: key channel offsets raise the INT8 path's error, not the FP16 path's", "[emulator]") {
  // The motivation of key smoothing: an offset shared by every token inflates each K block's
  // absmax scale, so the INT8 scores lose resolution; softmax itself ignores it (exact reference).
  const AttentionShape s = make_shape(4, 2, 128, true, {512}, {512});
  InputSpec spec;
  spec.kind = InputKind::llm_like;
  spec.seed = 9;
  spec.outlier_scale = 1.0f;  // the offsets are the keys' outliers, as in the models cited
  double int8_error[2], fp16_error[2];
  for (int i = 0; i < 2; ++i) {
    spec.k_channel_bias = i == 0 ? 0.0f : 8.0f;
    const AttentionInputs in = make_inputs(s, spec);
    const ExactResult ref = exact_attention(s, in);
    const TileGeometry geo{128, 64};
    int8_error[i] = compare(emulate_attention(s, in, uniform_plan(s, geo, true), kDefault).o, ref.o).rel_l2;
    fp16_error[i] = compare(emulate_attention(s, in, uniform_plan(s, geo, false), kDefault).o, ref.o).rel_l2;
  }
  INFO("INT8 rel_l2 " << int8_error[0] << " -> " << int8_error[1] << ", FP16 " << fp16_error[0] << " -> "
                      << fp16_error[1]);
  CHECK(int8_error[1] > 1.15 * int8_error[0]);  // about a quarter higher at this shape
  CHECK(fp16_error[1] < 2e-3);
}

namespace {

// Per query row and query head [hq, total_q]: a bound on how far the FP16 rounding of Ks moves
// the row's scores, softmax_scale * max_j sum_c |q_c| |e_jc| over the sequence's keys j, where
// e = Ks - (K - kbar) is that rounding's error: |e| <= 2^-11 |Ks| after the fp32 subtract's
// 2^-24, and 2^-25 where Ks is subnormal. The log-sum-exp moves by at most the largest score
// shift, a softmax-weighted mean by at most (e^(2 B) - 1) times the spread of the values.
std::vector<double> key_rounding_bound(const AttentionShape& s, const AttentionInputs& in, const SmoothedKeys& sk) {
  std::vector<double> bound(static_cast<size_t>(s.hq) * s.total_q(), 0.0);
  std::vector<double> err(s.d);
  for (int b = 0; b < s.batch(); ++b) {
    for (int h = 0; h < s.hq; ++h) {
      const int kvh = s.kv_head_of(h);
      for (int64_t t = s.cu_seqlens_q[b]; t < s.cu_seqlens_q[b + 1]; ++t) {
        double worst = 0.0;
        for (int64_t j = s.cu_seqlens_k[b]; j < s.cu_seqlens_k[b + 1]; ++j) {
          double sum = 0.0;
          for (int c = 0; c < s.d; ++c) {
            const double ks = std::fabs(half_to_float(sk.ks[(j * s.hk + kvh) * s.d + c]));
            const double e = ks * (0x1p-11 + 0x1p-21) + 0x1p-25;
            sum += std::fabs(half_to_float(in.q[(t * s.hq + h) * s.d + c])) * e;
          }
          worst = std::max(worst, sum);
        }
        bound[h * s.total_q() + t] = s.softmax_scale * worst;
      }
    }
  }
  return bound;
}

}  // namespace

TEST_CASE("emulator: smooth_k with every tile FP16 stays within the FP16 rounding of Ks", "[emulator]") {
  // Softmax ignores a shift per row, so with every tile FP16 smoothing only changes roundings:
  // above all Ks's own rounding to FP16 (relative 2^-11 of |K - kbar|, which the unsmoothed path,
  // reading the FP16 inputs as they are, does not have), then the fp32 roundings of the scores,
  // of p and of the LSE's shift back. The LSE of every row stays within the bound on the scores'
  // shift (key_rounding_bound) plus 1e-4 (fp32 noise of the two runs; |q . kbar| scale reaches
  // about 10 here); empty rows stay -inf. The output, a softmax-weighted mean of V, moves by less
  // than the bound's share of V's spread, and stays as close to exact as the FP16 path's own
  // roundings keep it (at these shapes the Ks rounding about doubles its relative L2, from 1.8e-4).
  struct Shape {
    int hq, hk, d;
    std::vector<int64_t> lq, lk;
  };
  // Varlen with an empty and a length-1 sequence, GQA, and rows without keys (Lq > Lk, causal).
  for (const Shape& c : {Shape{6, 2, 128, {300, 1, 0, 77, 200}, {300, 1, 0, 140, 100}},
                         Shape{4, 1, 64, {130, 257}, {200, 257}}}) {
    const AttentionShape s = make_shape(c.hq, c.hk, c.d, true, c.lq, c.lk);
    for (const float bias : {0.0f, 8.0f}) {
      InputSpec spec;
      spec.kind = InputKind::llm_like;
      spec.seed = 31;
      spec.k_channel_bias = bias;
      const AttentionInputs in = make_inputs(s, spec);
      const ExactResult ref = exact_attention(s, in);
      const std::vector<double> bound = key_rounding_bound(s, in, smooth_keys(s, in.q, in.k));
      double v_spread = 0.0;
      for (size_t i = 0; i < in.v.size(); ++i) v_spread = std::max<double>(v_spread, std::fabs(half_to_float(in.v[i])));
      v_spread *= 2;
      const RoutingPlan plan = uniform_plan(s, TileGeometry{128, 64}, false);
      for (const bool fused : {false, true}) {
        EmulatorOptions plain = kDefault;
        plain.fused_score_scale = fused;
        EmulatorOptions smooth = plain;
        smooth.numerics.smooth_k = true;
        const EmulatorResult a = emulate_attention(s, in, plan, plain);
        const EmulatorResult b = emulate_attention(s, in, plan, smooth);
        int64_t lse_beyond = 0, o_beyond = 0, inf_mismatch = 0;
        double max_lse_shift = 0.0, max_bound = 0.0;
        const double output_ulp = half_ulp(max_abs_value(half_to_double(a.o)));
        for (int h = 0; h < s.hq; ++h) {
          for (int64_t t = 0; t < s.total_q(); ++t) {
            const size_t row = h * s.total_q() + t;
            if (std::isinf(a.lse[row]) || std::isinf(b.lse[row])) {
              inf_mismatch += a.lse[row] != b.lse[row];
              continue;
            }
            const double shift = std::fabs(b.lse[row] - a.lse[row]);
            max_lse_shift = std::max(max_lse_shift, shift);
            max_bound = std::max(max_bound, bound[row]);
            lse_beyond += shift > bound[row] + 1e-4;
            const double o_bound = std::expm1(2 * bound[row]) * v_spread + 2 * output_ulp;
            for (int ch = 0; ch < s.d; ++ch) {
              const size_t i = (t * s.hq + h) * s.d + ch;
              o_beyond += std::fabs(half_to_float(b.o[i]) - half_to_float(a.o[i])) > o_bound;
            }
          }
        }
        const double plain_error = compare(a.o, ref.o).rel_l2, smooth_error = compare(b.o, ref.o).rel_l2;
        INFO("d " << c.d << " bias " << bias << " fused " << fused << ": rel_l2 to exact " << plain_error << " -> "
                  << smooth_error << ", largest LSE shift " << max_lse_shift << " (largest bound " << max_bound
                  << "), rows beyond the bound " << lse_beyond << ", outputs beyond theirs " << o_beyond);
        CHECK(compare(b.o, half_to_double(a.o)).nonfinite == 0);
        CHECK(inf_mismatch == 0);
        CHECK(lse_beyond == 0);
        CHECK(o_beyond == 0);
        CHECK(smooth_error < 3 * plain_error);
        check_rows(s, b, ref, max_bound + 1e-4);
      }
    }
  }
}

TEST_CASE("emulator: smooth_k removes the key offsets' INT8 error", "[emulator]") {
  // The offsets inflate every K block's absmax; Ks has the scales of keys without them.
  // The sink key (position 0, sink_scale 6 by default) keeps its block's wide scale whether or
  // not the keys are smoothed, and at this short length it holds much of the attention: at 1 it
  // leaves the offsets the largest INT8 error, as at long lengths where the sink's share is small.
  const AttentionShape s = make_shape(4, 2, 128, true, {512}, {512});
  InputSpec spec;
  spec.kind = InputKind::llm_like;
  spec.seed = 9;
  spec.outlier_scale = 1.0f;
  spec.sink_scale = 1.0f;
  const TileGeometry geo{128, 64};
  EmulatorOptions smooth = kDefault;
  smooth.numerics.smooth_k = true;
  double error[2][2];  // [bias 0, 8][plain, smoothed]
  for (int i = 0; i < 2; ++i) {
    spec.k_channel_bias = i == 0 ? 0.0f : 8.0f;
    const AttentionInputs in = make_inputs(s, spec);
    const ExactResult ref = exact_attention(s, in);
    const RoutingPlan plan = uniform_plan(s, geo, true);
    error[i][0] = compare(emulate_attention(s, in, plan, kDefault).o, ref.o).rel_l2;
    error[i][1] = compare(emulate_attention(s, in, plan, smooth).o, ref.o).rel_l2;
  }
  INFO("one, rel_l2 to exact: no offsets " << error[0][0] << " (smoothed " << error[0][1] << "), offsets "
                                           << error[1][0] << " (smoothed " << error[1][1] << ")");
  CHECK(error[1][1] <= 0.5 * error[1][0]);
  // Smoothed, the offsets cost (almost) nothing; and smoothing keys without offsets does no harm.
  CHECK(error[1][1] <= 1.1 * error[0][1]);
  CHECK(error[0][1] <= 1.05 * error[0][0]);
}

TEST_CASE("emulator: B=1 Hq=8 Hk=2 L=2048 d=128 causal within 10 s", "[.][perf]") {
  const AttentionShape s = make_shape(8, 2, 128, true, {2048}, {2048});
  const AttentionInputs in = seeded_inputs(s, 42);
  for (const bool int8 : {false, true}) {
    const RoutingPlan plan = uniform_plan(s, TileGeometry{128, 64}, int8);
    const auto start = std::chrono::steady_clock::now();
    const EmulatorResult r = emulate_attention(s, in, plan, kDefault);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    WARN("emulate_attention B=1 Hq=8 Hk=2 L=2048 d=128 causal, " << (int8 ? "one" : "zero") << " layout: " << seconds
                                                                 << " s");
    CHECK(r.o.size() == static_cast<size_t>(2048) * 8 * 128);
#ifndef TILEMIX_SANITIZED  // the sanitized build runs several times slower
    CHECK(seconds < 10.0);
#endif
  }
}

namespace {

EmulatorOptions with_pv(PvPrecision pv, int softmax_tiles = 1) {
  EmulatorOptions o = kDefault;
  o.numerics.pv = pv;
  o.softmax_tiles = softmax_tiles;
  return o;
}

}  // namespace

TEST_CASE("emulator: pv routed is pv fp16 on FP16 tiles and pv fp8 on INT8 tiles, bit for bit", "[emulator]") {
  const AttentionShape s = make_shape(4, 2, 64, true, {300, 1, 0, 129}, {300, 1, 0, 200});
  const AttentionInputs in = seeded_inputs(s, 81, InputKind::llm_like);
  const TileGeometry geo{128, 64};
  for (int steps : {1, 2}) {
    INFO("softmax_tiles " << steps);
    const RoutingPlan zero = uniform_plan(s, geo, false), one = uniform_plan(s, geo, true);
    const EmulatorResult routed_zero = emulate_attention(s, in, zero, with_pv(PvPrecision::routed, steps));
    const EmulatorResult fp16_zero = emulate_attention(s, in, zero, with_pv(PvPrecision::fp16, steps));
    CHECK(routed_zero.o == fp16_zero.o);
    CHECK(routed_zero.lse == fp16_zero.lse);
    const EmulatorResult routed_one = emulate_attention(s, in, one, with_pv(PvPrecision::routed, steps));
    const EmulatorResult fp8_one = emulate_attention(s, in, one, with_pv(PvPrecision::fp8, steps));
    CHECK(routed_one.o == fp8_one.o);
    // A mixed plan lies between: it differs from both.
    const RoutingPlan mixed = checkerboard_plan(s, geo);
    const EmulatorResult routed_mixed = emulate_attention(s, in, mixed, with_pv(PvPrecision::routed, steps));
    CHECK(routed_mixed.o != emulate_attention(s, in, mixed, with_pv(PvPrecision::fp16, steps)).o);
    CHECK(routed_mixed.o != emulate_attention(s, in, mixed, with_pv(PvPrecision::fp8, steps)).o);
  }
}

TEST_CASE("emulator: pv fp8 stays within E4M3 rounding of exact on awkward shapes", "[emulator]") {
  const TileGeometry geo{128, 64};
  const std::vector<AttentionShape> shapes = {
      make_shape(4, 2, 128, true, {512}, {512}),
      make_shape(3, 1, 64, false, {77, 300}, {300, 77}),
      make_shape(2, 1, 64, true, {300}, {77}),  // rows without keys
  };
  for (const AttentionShape& s : shapes) {
    for (const InputKind kind : {InputKind::gaussian, InputKind::llm_like}) {
      const AttentionInputs in = seeded_inputs(s, 82, kind);
      const ExactResult ref = exact_attention(s, in);
      for (const bool int8 : {false, true}) {
        const RoutingPlan plan = uniform_plan(s, geo, int8);
        const Deviation fp16 = compare(emulate_attention(s, in, plan, with_pv(PvPrecision::fp16)).o, ref.o);
        const EmulatorResult fp8 = emulate_attention(s, in, plan, with_pv(PvPrecision::fp8, 2));
        const Deviation dev = compare(fp8.o, ref.o);
        INFO(to_string(kind) << " int8 " << int8 << " d " << s.d << ": rel_l2 fp8 " << dev.rel_l2 << " fp16 "
                             << fp16.rel_l2);
        CHECK(dev.nonfinite == 0);
        // E4M3 keeps 3 mantissa bits: P8 and V8 each carry a relative error of up to 2^-4, RMS
        // 2^-4 / sqrt(3) = 0.036, and o's error relative to o is about sqrt(2) times that where
        // V's signs are random (gaussian): 0.03 measured.
        CHECK(dev.rel_l2 < fp16.rel_l2 + 0.05);
        CHECK(dev.rel_l2 > fp16.rel_l2);
        check_rows(s, fp8, ref, int8 ? 1.0 : 1e-2);
      }
    }
  }
}

namespace {

// One query (q = e0, d = 64) over keys whose scores are 0 with V = 0 before key `small_from`
// and about -20 (log2) with V = 1 from it: o is the small keys' share of the mass, about 2^-20.
AttentionInputs small_tile_inputs(const AttentionShape& s, uint64_t seed, int small_from) {
  AttentionInputs in = seeded_inputs(s, seed);
  std::fill(in.q.begin(), in.q.end(), uint16_t{0});
  std::fill(in.k.begin(), in.k.end(), uint16_t{0});
  std::fill(in.v.begin(), in.v.end(), uint16_t{0});
  in.q[0] = float_to_half(1.0f);
  const float k0 = -20.0f / (s.softmax_scale * 1.44269504f);
  for (int64_t j = small_from; j < s.total_k(); ++j) {
    in.k[static_cast<size_t>(j) * 64] = float_to_half(k0);
    for (int c = 0; c < 64; ++c) in.v[static_cast<size_t>(j) * 64 + c] = float_to_half(1.0f);
  }
  return in;
}

}  // namespace

TEST_CASE("emulator: pv fp8 scales P per row and step (a step 2^-20 below the row keeps its share)", "[emulator]") {
  // One query, three key tiles: tiles 0 and 1 (the first step of two tiles) score 0 with V = 0,
  // tile 2 scores about -20 (log2) with V = 1. o is tile 2's share of the mass, about 2^-20: with
  // P on a fixed 448 scale its P8 would be 448 * 2^-20, below E4M3's smallest subnormal, and o
  // would be 0.
  const AttentionShape s = make_shape(1, 1, 64, false, {1}, {192});
  const AttentionInputs in = small_tile_inputs(s, 83, 128);
  const ExactResult ref = exact_attention(s, in);
  REQUIRE(ref.o[0] > 1e-7);
  REQUIRE(ref.o[0] < 1e-5);
  for (int steps : {1, 2}) {
    const EmulatorResult fp8 = emulate_attention(s, in, uniform_plan(s, {128, 64}, false), with_pv(PvPrecision::fp8, steps));
    for (int c = 0; c < 64; ++c) CHECK(half_to_float(fp8.o[c]) == Approx(ref.o[c]).epsilon(0.01));
  }
}

TEST_CASE("emulator: pv fp8 rounds a key below 2^-18 of its step's maximum to 0", "[emulator]") {
  // The same keys in one step of two tiles (128 keys): tile 1 at 2^-20 of tile 0 shares tile 0's
  // factor, so its P8 rounds to 0 and o loses its share (at most 2^-12 of the group's mass);
  // with one tile per step it keeps it.
  const AttentionShape s = make_shape(1, 1, 64, false, {1}, {128});
  const AttentionInputs in = small_tile_inputs(s, 85, 64);
  const ExactResult ref = exact_attention(s, in);
  const RoutingPlan plan = uniform_plan(s, {128, 64}, false);
  const EmulatorResult tiles = emulate_attention(s, in, plan, with_pv(PvPrecision::fp8, 1));
  const EmulatorResult step = emulate_attention(s, in, plan, with_pv(PvPrecision::fp8, 2));
  for (int c = 0; c < 64; ++c) {
    CHECK(half_to_float(tiles.o[c]) == Approx(ref.o[c]).epsilon(0.01));
    CHECK(half_to_float(step.o[c]) == 0.0f);
  }
  EmulatorOptions wide = with_pv(PvPrecision::fp8, 4);
  CHECK_THROWS_WITH(emulate_attention(s, in, plan, wide), Catch::Contains("softmax_tiles <= 2"));
}

TEST_CASE("emulator: pv fp8 refuses fp16 accumulation and key tiles other than 64", "[emulator]") {
  const AttentionShape s = make_shape(1, 1, 64, false, {10}, {10});
  const AttentionInputs in = seeded_inputs(s, 84);
  EmulatorOptions o = with_pv(PvPrecision::fp8);
  o.numerics.accum = AccumPrecision::fp16;
  CHECK_THROWS_WITH(emulate_attention(s, in, uniform_plan(s, {128, 64}, false), o), Catch::Contains("FP32"));
  CHECK_THROWS_WITH(emulate_attention(s, in, uniform_plan(s, {64, 32}, false), with_pv(PvPrecision::routed)),
                    Catch::Contains("block_n 64"));
}
