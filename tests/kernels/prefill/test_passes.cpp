// The passes of a routed prefill call (kernels/include/tilemix/prefill_passes.hpp): which ones run
// for which numerics and routing words, what tilemix_prefill then runs, and which scratch they need.
#include <catch2/catch.hpp>

#include "tilemix/attention.hpp"
#include "tilemix/prefill_passes.hpp"

using namespace tilemix;
using gpu::PrefillPasses;
using gpu::PrefillWords;

namespace {

constexpr PrefillWords kInt8{true, false};
constexpr PrefillWords kFp16Only{false, false};

Numerics numerics_of(QuantMode mode, PvPrecision pv, bool smooth_k = false) {
  Numerics n;
  n.mode = mode;
  n.pv = pv;
  n.smooth_k = smooth_k;
  return n;
}

PrefillPasses passes_of(const Numerics& n, const PrefillWords& words,
                        PrefillMainloop mainloop = PrefillMainloop::automatic) {
  return gpu::prefill_passes(n, mainloop, words);
}

}  // namespace

TEST_CASE("any_int8_route: some word with a set bit", "[passes]") {
  CHECK_FALSE(gpu::any_int8_route({}));
  CHECK_FALSE(gpu::any_int8_route({0, 0, 0}));
  CHECK(gpu::any_int8_route({0, uint64_t{1} << 63, 0}));
}

TEST_CASE("quantize_once codes K with an INT8 route alone, and Q only for the kernels that read Q8", "[passes]") {
  const PrefillPasses once = passes_of(numerics_of(QuantMode::quantize_once, PvPrecision::fp16), kInt8);
  CHECK(once.quantize_keys);
  // automatic runs the warp-specialized kernel, which codes Q on chip.
  CHECK(once.mainloop == PrefillMainloop::warp_specialized);
  CHECK_FALSE(once.quantize_queries);
  CHECK(once.quantizes());
  CHECK(once.k_block_offsets());
  CHECK_FALSE(once.smooth_keys);
  CHECK_FALSE(once.quantize_values_fp8);
  CHECK_FALSE(once.adaptive_words);

  const PrefillPasses fp16_words = passes_of(numerics_of(QuantMode::quantize_once, PvPrecision::fp16), kFp16Only);
  CHECK_FALSE(fp16_words.quantize_keys);
  CHECK_FALSE(fp16_words.quantize_queries);
  CHECK_FALSE(fp16_words.k_block_offsets());

  // The older kernels read Q8 from memory.
  const PrefillPasses older =
      passes_of(numerics_of(QuantMode::quantize_once, PvPrecision::fp16), kInt8, PrefillMainloop::wgmma);
  CHECK(older.quantize_keys);
  CHECK(older.quantize_queries);
  CHECK_FALSE(
      passes_of(numerics_of(QuantMode::quantize_once, PvPrecision::fp16), kFp16Only, PrefillMainloop::wgmma)
          .quantize_queries);

  for (const PrefillMainloop m : {PrefillMainloop::automatic, PrefillMainloop::wgmma}) {
    const PrefillPasses otf = passes_of(numerics_of(QuantMode::on_the_fly, PvPrecision::fp16), kInt8, m);
    CHECK_FALSE(otf.quantize_keys);
    CHECK_FALSE(otf.quantize_queries);
    CHECK_FALSE(otf.quantizes());
    CHECK_FALSE(otf.k_block_offsets());
  }
}

TEST_CASE("smooth_keys runs with smooth_k in either mode, with or without an INT8 route", "[passes]") {
  for (const QuantMode mode : {QuantMode::quantize_once, QuantMode::on_the_fly}) {
    for (const PrefillWords& words : {kInt8, kFp16Only}) {
      INFO("mode " << to_string(mode) << " any_int8 " << words.any_int8);
      const PrefillPasses smooth = passes_of(numerics_of(mode, PvPrecision::fp16, true), words);
      CHECK(smooth.smooth_keys);
      CHECK(smooth.numerics.smooth_k);
      // Its block sums take the K blocks, also where quantize_keys does not run.
      CHECK(smooth.k_block_offsets());
      CHECK(smooth.quantize_keys == (mode == QuantMode::quantize_once && words.any_int8));
      CHECK_FALSE(passes_of(numerics_of(mode, PvPrecision::fp16), words).smooth_keys);
    }
  }
}

TEST_CASE("pv fp8 codes V whatever the words; pv routed only with an INT8 route", "[passes]") {
  for (const PrefillWords& words : {kInt8, kFp16Only}) {
    INFO("any_int8 " << words.any_int8);
    const PrefillPasses fp8 = passes_of(numerics_of(QuantMode::on_the_fly, PvPrecision::fp8), words);
    CHECK(fp8.quantize_values_fp8);
    CHECK(fp8.k_block_offsets());
    CHECK(fp8.numerics.pv == PvPrecision::fp8);
    CHECK(fp8.mainloop == PrefillMainloop::warp_specialized);
    CHECK_FALSE(passes_of(numerics_of(QuantMode::on_the_fly, PvPrecision::fp16), words).quantize_values_fp8);
  }
  const PrefillPasses routed = passes_of(numerics_of(QuantMode::on_the_fly, PvPrecision::routed), kInt8);
  CHECK(routed.quantize_values_fp8);
  CHECK(routed.k_block_offsets());
  CHECK(routed.numerics.pv == PvPrecision::routed);
  CHECK(routed.mainloop == PrefillMainloop::warp_specialized);
}

TEST_CASE("pv routed without an INT8 route runs as pv fp16 on FP8 P V's mainloop", "[passes]") {
  Numerics asked = numerics_of(QuantMode::quantize_once, PvPrecision::routed);
  asked.state = StatePrecision::fp16;
  const PrefillPasses p = passes_of(asked, kFp16Only);
  CHECK_FALSE(p.quantize_values_fp8);
  CHECK_FALSE(p.quantize_keys);
  CHECK_FALSE(p.quantize_queries);
  CHECK_FALSE(p.k_block_offsets());
  CHECK(p.numerics.pv == PvPrecision::fp16);
  // The rest of the numerics as asked.
  CHECK(p.numerics.state == StatePrecision::fp16);
  CHECK(p.numerics.mode == QuantMode::quantize_once);
  // automatic takes the mainloop of the FP8 kernel; a mainloop asked for by name stays.
  CHECK(p.mainloop == PrefillMainloop::warp_specialized);
  CHECK(passes_of(asked, kFp16Only, PrefillMainloop::wgmma).mainloop == PrefillMainloop::wgmma);
}

TEST_CASE("a mainloop asked for by name stays; automatic takes the faster kernel of the mode", "[passes]") {
  for (const QuantMode mode : {QuantMode::quantize_once, QuantMode::on_the_fly}) {
    const Numerics n = numerics_of(mode, PvPrecision::fp16);
    for (const PrefillMainloop m : {PrefillMainloop::wgmma, PrefillMainloop::warp_specialized}) {
      INFO("mode " << to_string(mode) << " mainloop " << to_string(m));
      CHECK(passes_of(n, kInt8, m).mainloop == m);
      CHECK(gpu::flash_mainloop(m) == m);
    }
  }
  // quantize_once: the warp-specialized kernel; on_the_fly: the older ones, where it is slower.
  CHECK(passes_of(numerics_of(QuantMode::quantize_once, PvPrecision::fp16), kInt8).mainloop ==
        PrefillMainloop::warp_specialized);
  CHECK(passes_of(numerics_of(QuantMode::on_the_fly, PvPrecision::fp16), kInt8).mainloop == PrefillMainloop::wgmma);
  // FP8 P V runs on the warp-specialized kernel alone, on_the_fly too.
  CHECK(passes_of(numerics_of(QuantMode::on_the_fly, PvPrecision::fp8), kInt8).mainloop ==
        PrefillMainloop::warp_specialized);
  CHECK(gpu::flash_mainloop(PrefillMainloop::automatic) == PrefillMainloop::warp_specialized);
}

TEST_CASE("adaptive_words runs where the words are built on the GPU", "[passes]") {
  const Numerics n = numerics_of(QuantMode::quantize_once, PvPrecision::fp16);
  const PrefillPasses adaptive = passes_of(n, PrefillWords{true, true});
  CHECK(adaptive.adaptive_words);
  CHECK(adaptive.quantize_keys);
  CHECK_FALSE(passes_of(n, kInt8).adaptive_words);
}
