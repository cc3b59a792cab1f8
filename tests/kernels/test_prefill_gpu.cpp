// The prefill kernels against the emulator (tightly) and the exact reference, on fresh random
// inputs: ragged lengths, varlen with length-1 and empty sequences, causal with Lq != Lk both
// ways, GQA, d 64 and 128, every layout, both modes, both state and accumulation precisions, the
// warp-specialized mainloop beside the older ones (against the emulator of its two-tile softmax
// steps, at both head dimensions and accumulations), and key smoothing.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/routing/layout.hpp"
#include "reference/emulator.hpp"
#include "reference/exact.hpp"
#include "tests/kernels/gpu_checks.hpp"
#include "apps/common/gpu_problem.hpp"
#include "tests/reference/attention_fixtures.hpp"
#include "tilemix/attention.hpp"
#include "tilemix/prefill_passes.hpp"

using namespace tilemix;
using namespace tilemix::app;
using namespace tilemix::testing;

namespace {

Numerics numerics(StatePrecision state = StatePrecision::fp32, AccumPrecision accum = AccumPrecision::fp32,
                  QuantMode mode = QuantMode::quantize_once) {
  Numerics n;
  n.state = state;
  n.accum = accum;
  n.mode = mode;
  return n;
}

EmulatorResult emulate(const AttentionShape& s, const AttentionInputs& in, const RoutingPlan& plan,
                       const Numerics& n) {
  EmulatorOptions o;
  o.numerics = n;
  return emulate_attention(s, in, plan, o);
}

bool identical(const KernelOutput& a, const KernelOutput& b) {
  return a.o == b.o && a.lse.size() == b.lse.size() &&
         std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * sizeof(float)) == 0;
}

struct Problem {
  const char* name;
  int hq, hk, d;
  bool causal;
  std::vector<int64_t> lq, lk;
  InputKind input;
};

// Lengths are multiples of no tile; GQA ratios 1, 3 and 8.
const std::vector<Problem> kProblems = {
    {"causal square d128 MHA", 4, 4, 128, true, {1000}, {1000}, InputKind::gaussian},
    {"non-causal varlen d64 GQA3", 6, 2, 64, false, {77, 300}, {300, 77}, InputKind::llm_like},
    {"causal varlen with length-1 and empty d128 GQA8", 8, 1, 128, true, {300, 1, 0, 129}, {300, 1, 0, 129},
     InputKind::llm_like},
    {"causal Lq > Lk (rows with no key) d64", 2, 1, 64, true, {300}, {77}, InputKind::gaussian},
    {"causal Lq < Lk d128", 3, 3, 128, true, {77}, {1000}, InputKind::gaussian},
};

}  // namespace

TEST_CASE("flash_fp16 and tilemix zero match the emulator", "[gpu][prefill]") {
  for (const Problem& pr : kProblems) {
    SECTION(pr.name) {
      const AttentionShape s = make_shape(pr.hq, pr.hk, pr.d, pr.causal, pr.lq, pr.lk);
      const AttentionInputs in = seeded_inputs(s, 11, pr.input);
      GpuProblem gpu(s, in);
      gpu.set_mainloop(PrefillMainloop::wgmma);  // the older kernels, whose steps are one tile
      const RoutingPlan plan = uniform_plan(s, gpu::tilemix_geometry(pr.d), false);
      const EmulatorResult emu = emulate(s, in, plan, numerics());
      const ExactResult exact = exact_attention(s, in);

      const KernelOutput flash = gpu.flash(numerics());
      const Agreement a = compare_outputs(flash, emu);
      INFO(a.describe());
      CHECK(tight(a));
      std::string why;
      const bool accurate = as_accurate_as_emulator(flash, emu, exact, &why);
      INFO(why);
      CHECK(accurate);

      // One mainloop: with every tile on FP16 the routed kernel is the baseline, bit for bit.
      for (QuantMode mode : {QuantMode::quantize_once, QuantMode::on_the_fly}) {
        CHECK(identical(gpu.tilemix(plan, numerics(StatePrecision::fp32, AccumPrecision::fp32, mode)), flash));
      }
    }
  }
}

TEST_CASE("tilemix matches the emulator for every layout, both modes bit-identical", "[gpu][prefill]") {
  struct Shape {
    int hq, hk, d;
    bool causal;
    std::vector<int64_t> lq, lk;
    InputKind input;
  };
  const Shape shapes[] = {{6, 2, 128, true, {700}, {700}, InputKind::llm_like},
                          {8, 1, 64, false, {333, 1, 129}, {200, 65, 129}, InputKind::gaussian}};
  for (const Shape& sh : shapes) {
    const AttentionShape s = make_shape(sh.hq, sh.hk, sh.d, sh.causal, sh.lq, sh.lk);
    const AttentionInputs in = seeded_inputs(s, 23 + sh.d, sh.input);
    const ExactResult exact = exact_attention(s, in);
    GpuProblem gpu(s, in);
    gpu.set_mainloop(PrefillMainloop::wgmma);  // the older kernels, whose steps are one tile
    for (LayoutKind layout : generated_layouts()) {
      const bool fixed = layout == LayoutKind::zero || layout == LayoutKind::one;
      for (double ratio : fixed ? std::vector<double>{0.0} : std::vector<double>{0.3, 0.7}) {
        const RoutingPlan plan = layout_plan(s, gpu::tilemix_geometry(sh.d), layout, ratio, 5);
        INFO("d=" << sh.d << " layout=" << to_string(layout) << " ratio=" << ratio);
        const EmulatorResult emu = emulate(s, in, plan, numerics());
        const KernelOutput once = gpu.tilemix(plan, numerics());
        const KernelOutput fly =
            gpu.tilemix(plan, numerics(StatePrecision::fp32, AccumPrecision::fp32, QuantMode::on_the_fly));
        const Agreement a = compare_outputs(once, emu);
        INFO(a.describe());
        CHECK(tight(a));
        CHECK(identical(once, fly));
        std::string why;
        const bool accurate = as_accurate_as_emulator(once, emu, exact, &why);
        INFO(why);
        CHECK(accurate);
      }
    }
  }
}

TEST_CASE("the mma_sync mainloop (the kernel of GPUs other than sm_90) matches the emulator at every d and "
          "accumulation, both modes bit-identical",
          "[gpu][prefill]") {
  // The problems above; d = 128 with fp32 accumulation runs on this kernel only with mma_sync.
  for (const Problem& pr : kProblems) {
    const AttentionShape s = make_shape(pr.hq, pr.hk, pr.d, pr.causal, pr.lq, pr.lk);
    const AttentionInputs in = seeded_inputs(s, 61, pr.input);
    const ExactResult exact = exact_attention(s, in);
    GpuProblem gpu(s, in);
    gpu.set_mainloop(PrefillMainloop::mma_sync);
    for (const AccumPrecision accum : {AccumPrecision::fp32, AccumPrecision::fp16}) {
      INFO(pr.name << " accum=" << to_string(accum));
      const Numerics n = numerics(StatePrecision::fp32, accum);
      const RoutingPlan zero = uniform_plan(s, gpu::flash_geometry(pr.d), false);
      const KernelOutput flash = gpu.flash(n);
      CHECK(tight(compare_outputs(flash, emulate(s, in, zero, n)), StatePrecision::fp32, accum));
      CHECK(identical(gpu.tilemix(zero, n), flash));
      for (LayoutKind layout : {LayoutKind::one, LayoutKind::sptrans}) {
        INFO("layout=" << to_string(layout));
        const RoutingPlan plan = layout_plan(s, gpu::tilemix_geometry(pr.d), layout, 0.5, 3);
        const KernelOutput once = gpu.tilemix(plan, n);
        const EmulatorResult emu = emulate(s, in, plan, n);
        const Agreement a = compare_outputs(once, emu);
        INFO(a.describe());
        CHECK(tight(a, StatePrecision::fp32, accum));
        CHECK(identical(once, gpu.tilemix(plan, numerics(StatePrecision::fp32, accum, QuantMode::on_the_fly))));
        std::string why;
        const bool accurate = as_accurate_as_emulator(once, emu, exact, &why);
        INFO(why);
        CHECK(accurate);
      }
    }
  }
}

EmulatorResult emulate_ws(const AttentionShape& s, const AttentionInputs& in, const RoutingPlan& plan,
                          const Numerics& n) {
  EmulatorOptions o;
  o.numerics = n;
  const PrefillEmulation emulation = gpu::prefill_emulation(PrefillMainloop::warp_specialized);
  o.softmax_tiles = emulation.softmax_tiles;
  o.fused_score_scale = emulation.fused_score_scale;
  return emulate_attention(s, in, plan, o);
}

TEST_CASE("the warp-specialized mainloop matches the emulator of its two-tile steps and fused scale", "[gpu][prefill]") {
  // Every problem above (varlen with empty and length-1 sequences, Lq < Lk and Lq > Lk, GQA 8, d 64
  // and 128), query tiles with no key, odd tile counts (a last step of one tile), and a batch whose
  // tiles outnumber the SMs, so that the persistent CTAs take several work tiles.
  std::vector<Problem> problems = kProblems;
  problems.push_back({"causal Lq > Lk (query tiles with no key) d128", 2, 1, 128, true, {300}, {77}, InputKind::gaussian});
  problems.push_back({"non-causal varlen d128 GQA3, more tiles than SMs", 12, 4, 128, false,
                      {1500, 640, 129, 2000}, {1500, 640, 129, 2000}, InputKind::llm_like});
  // Several work tiles per CTA with tiles of no key and an empty sequence among tiles with keys
  // (what one work tile leaves behind must not reach the next one's).
  problems.push_back({"causal varlen d128 GQA4, query tiles with no key among more tiles than SMs", 16, 4, 128, true,
                      {1000, 0, 300, 700}, {200, 0, 77, 700}, InputKind::llm_like});
  // Over 64 key tiles a group spans two tiles: steps of one path (the one-product instance)...
  problems.push_back({"causal Lq < Lk d128, groups of two tiles", 2, 1, 128, true, {300}, {4200}, InputKind::llm_like});
  // ... unless one sequence's groups are of one tile.
  problems.push_back({"non-causal varlen d128, groups of two and one tiles", 2, 2, 128, false, {200, 130},
                      {4200, 1000}, InputKind::gaussian});
  problems.push_back({"causal varlen d64 GQA4, groups of two and one tiles", 8, 2, 64, true, {4200, 130},
                      {4200, 1000}, InputKind::llm_like});
  REQUIRE(gpu::prefill_emulation(PrefillMainloop::warp_specialized).softmax_tiles == 2);
  REQUIRE(gpu::prefill_emulation(PrefillMainloop::warp_specialized).fused_score_scale);
  for (const Problem& pr : problems) {
    const AttentionShape s = make_shape(pr.hq, pr.hk, pr.d, pr.causal, pr.lq, pr.lk);
    const AttentionInputs in = seeded_inputs(s, 41, pr.input);
    const ExactResult exact = exact_attention(s, in);
    GpuProblem gpu(s, in);
    gpu.set_mainloop(PrefillMainloop::warp_specialized);
    for (const auto& [state, accum] : {std::pair{StatePrecision::fp32, AccumPrecision::fp32},
                                       std::pair{StatePrecision::fp16, AccumPrecision::fp32},
                                       std::pair{StatePrecision::fp32, AccumPrecision::fp16},
                                       std::pair{StatePrecision::fp16, AccumPrecision::fp16}}) {
      INFO(pr.name << " state=" << to_string(state) << " accum=" << to_string(accum));
      const Numerics n = numerics(state, accum);
      const KernelOutput flash = gpu.flash(n);
      const RoutingPlan zero = uniform_plan(s, gpu::flash_geometry(pr.d), false);
      const EmulatorResult flash_emu = emulate_ws(s, in, zero, n);
      const Agreement fa = compare_outputs(flash, flash_emu);
      INFO("flash_fp16: " << fa.describe());
      CHECK(tight(fa, state, accum));
      // One mainloop: with every tile on FP16 the routed kernel is the baseline, bit for bit.
      CHECK(identical(gpu.tilemix(zero, n), flash));
      Numerics zero_on_the_fly = n;
      zero_on_the_fly.mode = QuantMode::on_the_fly;
      CHECK(identical(gpu.tilemix(zero, zero_on_the_fly), flash));
      for (LayoutKind layout : {LayoutKind::one, LayoutKind::sptrans, LayoutKind::rowrand}) {
        INFO("layout=" << to_string(layout));
        const RoutingPlan plan = layout_plan(s, gpu::tilemix_geometry(pr.d), layout, 0.5, 7);
        const KernelOutput ws = gpu.tilemix(plan, n);
        const EmulatorResult emu = emulate_ws(s, in, plan, n);
        const Agreement a = compare_outputs(ws, emu);
        INFO(a.describe());
        CHECK(tight(a, state, accum));
        // on_the_fly codes K8 on chip (the quantizer warps), quantize_once copies quantize_keys' codes
        // (both code Q8 on chip: test_onchip_codes_gpu.cpp): the same codes, bit for bit.
        Numerics on_the_fly = n;
        on_the_fly.mode = QuantMode::on_the_fly;
        CHECK(identical(ws, gpu.tilemix(plan, on_the_fly)));
        std::string why;
        const bool accurate = as_accurate_as_emulator(ws, emu, exact, &why);
        INFO(why);
        CHECK(accurate);
      }
    }
  }
}

TEST_CASE("the warp-specialized kernel's CTAs take work tiles as they free up: the static order's outputs, the "
          "counters left zero",
          "[gpu][prefill]") {
  // Causal varlen with an empty sequence and more work tiles than SMs (several per CTA, of
  // unequal lengths), d 128 and 64; each call twice with the counters (the second finds them as
  // the first left them), then in the static order. Both shapes have more work tiles with rows
  // than the GPU has SMs (448 and 144 against 132).
  const std::vector<Problem> problems = {
      {"causal varlen d128 GQA4, 448 work tiles", 16, 4, 128, true, {1000, 0, 300, 2100}, {1000, 0, 300, 2100},
       InputKind::llm_like},
      {"causal Lq > Lk varlen d64 GQA2, query tiles with no key", 8, 4, 64, true, {1500, 700}, {300, 700},
       InputKind::gaussian},
  };
  const auto not_finite = [](uint16_t h) { return (h & 0x7c00u) == 0x7c00u; };  // the poison 0xFFFF among them
  for (const Problem& pr : problems) {
    const AttentionShape s = make_shape(pr.hq, pr.hk, pr.d, pr.causal, pr.lq, pr.lk);
    const AttentionInputs in = seeded_inputs(s, 43, pr.input);
    GpuProblem gpu(s, in);
    gpu.set_mainloop(PrefillMainloop::warp_specialized);
    const RoutingPlan sptrans = layout_plan(s, gpu::tilemix_geometry(pr.d), LayoutKind::sptrans, 0.5, 11);
    Numerics on_the_fly = numerics();
    on_the_fly.mode = QuantMode::on_the_fly;
    Numerics pv_fp8 = numerics();
    pv_fp8.pv = PvPrecision::fp8;
    const std::vector<std::pair<std::string, std::function<KernelOutput()>>> calls = {
        {"flash_fp16", [&] { return gpu.flash(numerics()); }},
        {"sptrans 50% quantize_once", [&] { return gpu.tilemix(sptrans, numerics()); }},
        {"sptrans 50% on_the_fly", [&] { return gpu.tilemix(sptrans, on_the_fly); }},
        {"sptrans 50% pv fp8", [&] { return gpu.tilemix(sptrans, pv_fp8); }},
    };
    for (const auto& [name, call] : calls) {
      INFO(pr.name << ": " << name);
      gpu.set_dynamic_work_tiles(true);
      const KernelOutput first = call();
      CHECK(gpu.work_tile_counters() == std::vector<uint64_t>{0, 0});
      const KernelOutput again = call();
      CHECK(gpu.work_tile_counters() == std::vector<uint64_t>{0, 0});
      gpu.set_dynamic_work_tiles(false);
      const KernelOutput static_order = call();
      CHECK(identical(first, static_order));
      CHECK(identical(again, static_order));
      // Every row written: the poison is gone.
      CHECK(std::none_of(static_order.o.begin(), static_order.o.end(), not_finite));
    }
    // The counters reach the kernel: set past every tile, each CTA runs its first tile alone, so
    // rows stay poisoned (NaN), and the call still leaves the counters zero. From 2^63 on, the
    // claimed index would turn negative and, cut to 32 bits, name the tiles from gridDim.x on (and
    // every row would be written) unless take() clamps it.
    gpu.set_dynamic_work_tiles(true);
    for (const uint64_t taken : {uint64_t{1} << 40, uint64_t{1} << 63}) {
      INFO(pr.name << ": counter set to " << taken);
      gpu.set_work_tile_counters({taken, 0});
      const KernelOutput first_tiles_only = gpu.flash(numerics());
      CHECK(std::any_of(first_tiles_only.o.begin(), first_tiles_only.o.end(), not_finite));
      CHECK(gpu.work_tile_counters() == std::vector<uint64_t>{0, 0});
    }
  }
}

TEST_CASE("on the warp-specialized mainloop a flipped routing bit fails the tight comparison",
          "[gpu][prefill][mutation]") {
  // One query tile and every other group flipped: with groups of one tile every step then has
  // mixed halves, so each half's route reaches its own product and scale; with groups of two
  // tiles (66 key tiles) every other step of the one-product instance is rerouted. Both head
  // dimensions (their INT8 rows differ: 128-byte and 64-byte swizzles).
  for (const auto& [d, lk] : {std::pair{128, int64_t{256}}, std::pair{128, int64_t{4200}}, std::pair{64, int64_t{256}},
                              std::pair{64, int64_t{4200}}}) {
    const AttentionShape s = make_shape(2, 1, d, false, {128}, {lk});
    const AttentionInputs in = seeded_inputs(s, 43, InputKind::llm_like);
    GpuProblem gpu(s, in);
    gpu.set_mainloop(PrefillMainloop::warp_specialized);
    for (LayoutKind layout : {LayoutKind::one, LayoutKind::zero}) {
      const RoutingPlan plan = layout_plan(s, gpu::tilemix_geometry(d), layout);
      REQUIRE(plan.tilings[0].g == (lk > 64 * 64 ? 2 : 1));
      const EmulatorResult emu = emulate_ws(s, in, plan, numerics());
      CHECK(tight(compare_outputs(gpu.tilemix(plan, numerics()), emu)));
      for (int first : {0, 1}) {
        INFO("d " << d << " lk " << lk << ": flip of every other group from " << first << " in a plan of layout "
                   << to_string(layout));
        std::vector<uint64_t> flipped = plan.words;
        const int groups = plan.tilings[0].tmask;
        flipped[0] ^= (0x5555555555555555ull << first) & (groups >= 64 ? ~0ull : (1ull << groups) - 1);
        RoutingPlan mutated = plan;
        set_explicit_words(mutated, flipped, "mutated words");
        // The mutation must matter well beyond the tolerance, or this test proves nothing.
        const EmulatorResult mutated_emu = emulate_ws(s, in, mutated, numerics());
        const Deviation model_shift = deviation(half_to_double(mutated_emu.o), half_to_double(emu.o));
        REQUIRE(model_shift.rel_l2 > 3.0 * *tight_vs_emulator().rel_l2);
        const KernelOutput mutant_o = gpu.tilemix(plan, flipped, numerics());
        const Agreement mutant = compare_outputs(mutant_o, emu);
        INFO("mutant: " << mutant.describe());
        CHECK_FALSE(within(mutant.dev, tight_vs_emulator()));
        // ... and the mutant is exactly what the emulator makes of the mutated words, in both modes
        // (on_the_fly codes the rerouted tiles on chip).
        CHECK(tight(compare_outputs(mutant_o, mutated_emu)));
        CHECK(identical(mutant_o, gpu.tilemix(plan, flipped,
                                              numerics(StatePrecision::fp32, AccumPrecision::fp32, QuantMode::on_the_fly))));
      }
    }
  }
}

TEST_CASE("tilemix with smooth_k matches the smoothed emulator on both mainloops, both modes bit-identical",
          "[gpu][prefill]") {
  // Keys with channel offsets; causal varlen GQA with an empty and a length-1 sequence and one of
  // more queries than keys (rows without keys keep lse = -inf through the LSE's shift). Every
  // INT8 tile and a mixed layout, each mainloop against the emulator of its softmax steps.
  struct Case {
    const char* name;
    int hq, hk, d;
    std::vector<int64_t> lq, lk;
  };
  const Case cases[] = {{"d128 GQA4", 8, 2, 128, {600, 1, 0, 300}, {600, 1, 0, 77}},
                        {"d64 GQA3", 6, 2, 64, {333, 0, 1, 129}, {333, 0, 1, 200}}};
  Numerics smooth = numerics();
  smooth.smooth_k = true;
  Numerics smooth_on_the_fly = smooth;
  smooth_on_the_fly.mode = QuantMode::on_the_fly;
  for (const Case& c : cases) {
    const AttentionShape s = make_shape(c.hq, c.hk, c.d, true, c.lq, c.lk);
    InputSpec spec;
    spec.kind = InputKind::llm_like;
    spec.seed = 47;
    spec.k_channel_bias = 8.0f;
    const AttentionInputs in = make_inputs(s, spec);
    const ExactResult exact = exact_attention(s, in);
    for (const PrefillMainloop mainloop : {PrefillMainloop::wgmma, PrefillMainloop::warp_specialized}) {
      GpuProblem gpu(s, in);
      gpu.set_mainloop(mainloop);
      const PrefillEmulation emulation = gpu::prefill_emulation(mainloop);
      for (const auto& [layout, ratio] : {std::pair{LayoutKind::one, 0.0}, std::pair{LayoutKind::sptrans, 0.5}}) {
        INFO(c.name << " mainloop=" << to_string(mainloop) << " layout=" << to_string(layout));
        const RoutingPlan plan = layout_plan(s, gpu::tilemix_geometry(c.d), layout, ratio, 9);
        EmulatorOptions options;
        options.numerics = smooth;
        options.softmax_tiles = emulation.softmax_tiles;
        options.fused_score_scale = emulation.fused_score_scale;
        const EmulatorResult emu = emulate_attention(s, in, plan, options);
        // Smoothing must move the output well beyond the tolerance, or agreeing proves nothing.
        options.numerics.smooth_k = false;
        const EmulatorResult unsmoothed = emulate_attention(s, in, plan, options);
        REQUIRE(deviation(half_to_double(emu.o), half_to_double(unsmoothed.o)).rel_l2 >
                3.0 * *tight_vs_emulator().rel_l2);

        const KernelOutput once = gpu.tilemix(plan, smooth);
        const Agreement a = compare_outputs(once, emu);
        INFO(a.describe());
        CHECK(tight(a));
        std::string why;
        const bool accurate = as_accurate_as_emulator(once, emu, exact, &why);
        INFO(why);
        CHECK(accurate);
        CHECK(identical(once, gpu.tilemix(plan, smooth_on_the_fly)));
      }
    }
  }
}

TEST_CASE("fp16 state and fp16 accumulation follow the emulator", "[gpu][prefill]") {
  for (int d : {64, 128}) {
    const AttentionShape s = make_shape(4, 2, d, true, {600, 65}, {600, 65});
    const AttentionInputs in = seeded_inputs(s, 31, InputKind::llm_like);
    GpuProblem gpu(s, in);
    gpu.set_mainloop(PrefillMainloop::wgmma);  // the older kernels, whose steps are one tile
    const RoutingPlan plan = layout_plan(s, gpu::tilemix_geometry(d), LayoutKind::rowrand, 0.5, 3);
    for (StatePrecision state : {StatePrecision::fp32, StatePrecision::fp16}) {
      for (AccumPrecision accum : {AccumPrecision::fp32, AccumPrecision::fp16}) {
        INFO("d=" << d << " state=" << to_string(state) << " accum=" << to_string(accum));
        const EmulatorResult emu = emulate(s, in, plan, numerics(state, accum));
        const KernelOutput once = gpu.tilemix(plan, numerics(state, accum));
        const Agreement a = compare_outputs(once, emu);
        INFO(a.describe());
        CHECK(tight(a, state, accum));
        CHECK(identical(once, gpu.tilemix(plan, numerics(state, accum, QuantMode::on_the_fly))));
        const RoutingPlan zero = uniform_plan(s, gpu::flash_geometry(d), false);
        const Agreement f = compare_outputs(gpu.flash(numerics(state, accum)), emulate(s, in, zero, numerics(state, accum)));
        INFO("flash_fp16: " << f.describe());
        CHECK(tight(f, state, accum));
      }
    }
  }
}

TEST_CASE("a flipped routing bit fails the tight comparison", "[gpu][prefill][mutation]") {
  // One query tile, two key tiles of one group each: a flip reroutes half the keys of every row.
  const AttentionShape s = make_shape(2, 1, 64, false, {128}, {128});
  const AttentionInputs in = seeded_inputs(s, 41, InputKind::llm_like);
  GpuProblem gpu(s, in);
  gpu.set_mainloop(PrefillMainloop::wgmma);  // the older kernels, whose steps are one tile
  for (LayoutKind layout : {LayoutKind::one, LayoutKind::zero}) {
    const RoutingPlan plan = layout_plan(s, gpu::tilemix_geometry(64), layout);
    REQUIRE(plan.tilings[0].g == 1);
    INFO("flip in a plan of layout " << to_string(layout));
    const EmulatorResult emu = emulate(s, in, plan, numerics());
    std::vector<uint64_t> flipped = plan.words;
    flipped[0] ^= 1ull;  // group 0 of query tile 0: legal, INT8 <-> FP16
    // The mutation must matter well beyond the tolerance, or this test proves nothing.
    RoutingPlan mutated = plan;
    set_explicit_words(mutated, flipped, "mutated words");
    const Deviation model_shift = deviation(half_to_double(emulate(s, in, mutated, numerics()).o), half_to_double(emu.o));
    REQUIRE(model_shift.rel_l2 > 3.0 * *tight_vs_emulator().rel_l2);

    for (QuantMode mode : {QuantMode::quantize_once, QuantMode::on_the_fly}) {
      const Numerics n = numerics(StatePrecision::fp32, AccumPrecision::fp32, mode);
      const Agreement honest = compare_outputs(gpu.tilemix(plan, n), emu);
      INFO("honest: " << honest.describe());
      CHECK(tight(honest));
      const Agreement mutant = compare_outputs(gpu.tilemix(plan, flipped, n), emu);
      INFO("mutant: " << mutant.describe());
      CHECK_FALSE(tight(mutant));
      CHECK_FALSE(within(mutant.dev, tight_vs_emulator()));
    }
  }
}

TEST_CASE("unsupported values are rejected by name before any launch", "[gpu][prefill]") {
  const AttentionShape s = make_shape(2, 1, 64, true, {100}, {100});
  const AttentionInputs in = seeded_inputs(s, 3);
  GpuProblem gpu(s, in);
  gpu::PrefillParams p = gpu.params(numerics());
  p.d = 96;
  CHECK_THROWS_WITH(gpu::flash_fp16_prefill(p, nullptr), Catch::Contains("d=96"));
  CHECK_THROWS_AS(gpu::tilemix_prefill(p, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(gpu::quantize_queries(p, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(gpu::quantize_keys(p, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(gpu::tilemix_geometry(96), std::invalid_argument);
  p = gpu.params(numerics());
  p.numerics.accum = static_cast<AccumPrecision>(7);
  CHECK_THROWS_WITH(gpu::flash_fp16_prefill(p, nullptr), Catch::Contains("accumulation precision 7"));
  p = gpu.params(numerics());
  p.softmax_scale = 0.0f;
  CHECK_THROWS_WITH(gpu::flash_fp16_prefill(p, nullptr), Catch::Contains("softmax_scale"));
  p = gpu.params(numerics());
  p.work_tile_counters = reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(p.work_tile_counters) + 4);
  CHECK_THROWS_WITH(gpu::flash_fp16_prefill(p, nullptr), Catch::Contains("work_tile_counters"));
  p = gpu.params(numerics());
  CHECK_THROWS_WITH(gpu::tilemix_prefill(p, nullptr), Catch::Contains("words"));  // no routing given
  // smooth_k without the smoothed keys' buffer.
  p.numerics.smooth_k = true;
  p.k_smoothed = nullptr;
  CHECK_THROWS_WITH(gpu::smooth_keys(p, nullptr), Catch::Contains("k_smoothed"));
  CHECK_THROWS_WITH(gpu::quantize_keys(p, nullptr), Catch::Contains("k_smoothed"));
}

TEST_CASE("FP8 P V (pv fp8 and routed) follows the emulator on the warp-specialized mainloop, both modes bit-identical",
          "[gpu][prefill][fp8]") {
  // The problems above (varlen with empty and length-1 sequences, Lq > Lk with rows of no key,
  // Lq < Lk, GQA 8, d 64 and 128, a last step of one tile), every tile INT8, a mixed layout and
  // every tile FP16. P8's codes may differ from the emulator's where p f lies at a rounding
  // boundary of E4M3 (exp2 and f are formed differently), so only the relative L2 is bounded
  // (gpu.json's pv cases: 1.3e-4 to 2.0e-4 on the H200), not the share within 2 FP16 ulps.
  Tolerance fp8_bound;
  fp8_bound.rel_l2 = 2e-3;
  for (const Problem& pr : kProblems) {
    const AttentionShape s = make_shape(pr.hq, pr.hk, pr.d, pr.causal, pr.lq, pr.lk);
    const AttentionInputs in = seeded_inputs(s, 53, pr.input);
    const ExactResult exact = exact_attention(s, in);
    GpuProblem gpu(s, in);
    for (const PvPrecision pv : {PvPrecision::fp8, PvPrecision::routed}) {
      for (const auto& [layout, ratio] :
           {std::pair{LayoutKind::one, 0.0}, std::pair{LayoutKind::sptrans, 0.5}, std::pair{LayoutKind::zero, 0.0}}) {
        INFO(pr.name << " pv=" << to_string(pv) << " layout=" << to_string(layout));
        const RoutingPlan plan = layout_plan(s, gpu::tilemix_geometry(pr.d), layout, ratio, 11);
        Numerics n = numerics();
        n.pv = pv;
        const EmulatorResult emu = emulate_ws(s, in, plan, n);
        const KernelOutput got = gpu.tilemix(plan, n);
        const Agreement a = compare_outputs(got, emu);
        INFO(a.describe());
        CHECK(a.unwritten == 0);
        CHECK(a.lse_unwritten == 0);
        CHECK(a.lse_inf_mismatch == 0);
        CHECK(within(a.dev, fp8_bound));
        std::string why;
        const bool accurate = as_accurate_as_emulator(got, emu, exact, &why);
        INFO(why);
        CHECK(accurate);
        Numerics on_the_fly = n;
        on_the_fly.mode = QuantMode::on_the_fly;
        CHECK(identical(got, gpu.tilemix(plan, on_the_fly)));
        const gpu::PrefillWords words{gpu::any_int8_route(plan.words), false};
        const bool any_fp8 = gpu::prefill_passes(n, PrefillMainloop::automatic, words).quantize_values_fp8;
        if (any_fp8 && s.total_k() > 0) {
          // The FP8 products ran: the output is nearer FP8's emulator than FP16 P V's.
          Numerics fp16_pv = n;
          fp16_pv.pv = PvPrecision::fp16;
          const Deviation to_fp16 = deviation(half_to_double(got.o), half_to_double(emulate_ws(s, in, plan, fp16_pv).o));
          INFO("to the FP16 P V emulator: rel_l2 " << to_fp16.rel_l2);
          CHECK(to_fp16.rel_l2 > 2.0 * a.dev.rel_l2);
        } else {
          // pv routed with every tile FP16 is the FP16 P V kernel, bit for bit.
          Numerics fp16_pv = n;
          fp16_pv.pv = PvPrecision::fp16;
          gpu.set_mainloop(PrefillMainloop::warp_specialized);
          CHECK(identical(got, gpu.tilemix(plan, fp16_pv)));
          gpu.set_mainloop(PrefillMainloop::automatic);
        }
      }
    }
  }
}
