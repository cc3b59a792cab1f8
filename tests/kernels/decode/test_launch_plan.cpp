#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/decode/decode_shape.hpp"
#include "core/routing/plan.hpp"
#include "kernels/decode/config.hpp"
#include "kernels/decode/plan.hpp"
#include "tests/reference/attention_fixtures.hpp"

using namespace tilemix;
using namespace tilemix::testing;

namespace {

// Hq = 32, Hk = 8 (4 rows per new token), d = 128: the bench's decode shape.
DecodeShape llama_shape(std::vector<int64_t> cache_len, int new_tokens) {
  DecodeShape s = decode_shape(32, 8, 128, cache_len, std::vector<int64_t>(cache_len.size(), new_tokens));
  validate_decode(s);
  return s;
}

DecodeLaunchChoices with_mainloop(DecodeMainloop mainloop) {
  DecodeLaunchChoices choices;
  choices.mainloop = mainloop;
  return choices;
}

}  // namespace

TEST_CASE("decode mainloop and resident CTAs per configuration", "[decode]") {
  const auto resolve = [](DecodeMainloop m, CacheKind c, int d, int rows) {
    return gpu::decode_mainloop(m, c, d, rows);
  };
  // Automatic: wgmma for 33-64 rows of the INT8 cache at d = 128 only.
  CHECK(resolve(DecodeMainloop::automatic, CacheKind::int8, 128, 4) == DecodeMainloop::mma_sync);
  CHECK(resolve(DecodeMainloop::automatic, CacheKind::int8, 128, 32) == DecodeMainloop::mma_sync);
  CHECK(resolve(DecodeMainloop::automatic, CacheKind::int8, 128, 33) == DecodeMainloop::wgmma);
  CHECK(resolve(DecodeMainloop::automatic, CacheKind::int8, 128, 64) == DecodeMainloop::wgmma);
  CHECK(resolve(DecodeMainloop::automatic, CacheKind::int8, 128, 128) == DecodeMainloop::mma_sync);
  CHECK(resolve(DecodeMainloop::automatic, CacheKind::int8, 64, 64) == DecodeMainloop::mma_sync);
  CHECK(resolve(DecodeMainloop::automatic, CacheKind::fp16, 128, 64) == DecodeMainloop::mma_sync);
  CHECK(resolve(DecodeMainloop::wgmma, CacheKind::int8, 128, 8) == DecodeMainloop::wgmma);
  CHECK(resolve(DecodeMainloop::mma_sync, CacheKind::int8, 128, 64) == DecodeMainloop::mma_sync);
  CHECK(gpu::decode_wgmma_applies(CacheKind::int8, 128, 64));
  CHECK_FALSE(gpu::decode_wgmma_applies(CacheKind::int8, 128, 65));
  CHECK_FALSE(gpu::decode_wgmma_applies(CacheKind::fp16, 128, 64));
  // The split plan sizes its waves with the launch plan's resident CTAs.
  const auto plan = [](int new_tokens, CacheKind cache, DecodeMainloop mainloop = DecodeMainloop::automatic) {
    return plan_decode_launch(llama_shape({4096}, new_tokens), cache, 132, with_mainloop(mainloop));
  };
  CHECK(plan(1, CacheKind::int8).resident_ctas == 3);   // mma.sync, 8-row tile
  CHECK(plan(4, CacheKind::int8).resident_ctas == 3);   // mma.sync, 16 rows
  CHECK(plan(8, CacheKind::int8).resident_ctas == 2);   // mma.sync, 32 rows
  CHECK(plan(16, CacheKind::int8).resident_ctas == 3);  // wgmma, 64 rows
  CHECK(plan(16, CacheKind::int8, DecodeMainloop::mma_sync).resident_ctas == 2);
  CHECK(plan(1, CacheKind::fp16).resident_ctas == 2);  // FP16 cache
  CHECK(plan(16, CacheKind::int8).mainloop == DecodeMainloop::wgmma);
  CHECK(plan(16, CacheKind::int8).cta_rows == 64);
  // The wgmma kernel is sm_90a's: on an A100 or an L40S automatic takes mma.sync at 64 rows too,
  // and its resident CTAs size the waves.
  for (const ComputeCapability cc : {ComputeCapability{8, 0}, ComputeCapability{8, 9}}) {
    INFO("sm_" << cc.sm());
    const DecodeLaunchPlan p = plan_decode_launch(llama_shape({4096}, 16), CacheKind::int8, {108, cc});
    CHECK(p.mainloop == DecodeMainloop::mma_sync);
    CHECK(p.resident_ctas == 2);
    CHECK(p.sm_count == 108);
    CHECK(gpu::decode_mainloop(DecodeMainloop::automatic, CacheKind::int8, 128, 64, cc) == DecodeMainloop::mma_sync);
    // wgmma asked for by name is refused there, naming the GPU and its sm_.
    CHECK_FALSE(decode_mainloop_runs_on(DecodeMainloop::wgmma, cc));
    CHECK_NOTHROW(require_decode_mainloop_runs(DecodeMainloop::mma_sync, cc, "GPU X"));
    CHECK_THROWS_WITH(require_decode_mainloop_runs(DecodeMainloop::wgmma, cc, "GPU X"),
                      Catch::Contains("GPU X is sm_" + std::to_string(cc.sm())) && Catch::Contains("wgmma"));
  }
  CHECK(decode_mainloop_runs_on(DecodeMainloop::wgmma, ComputeCapability{9, 0}));
  CHECK_NOTHROW(require_decode_mainloop_runs(DecodeMainloop::wgmma, ComputeCapability{9, 0}, "GPU X"));
  CHECK(plan(16, CacheKind::fp16).mainloop == DecodeMainloop::mma_sync);
  // The FP16 cache has no wgmma kernel: a config's mainloop is the INT8 cache's alone.
  CHECK(plan(16, CacheKind::fp16, DecodeMainloop::wgmma).mainloop == DecodeMainloop::mma_sync);
  CHECK(gpu::decode_fp16_tile_cost(CacheKind::int8, plan(16, CacheKind::int8).mainloop) ==
        gpu::kDecodeWgmmaFp16TileCost);
  CHECK(gpu::decode_fp16_tile_cost(CacheKind::int8, plan(4, CacheKind::int8).mainloop) == 1.0);
}

TEST_CASE("a launch plan's grid and combine follow from its splits", "[decode]") {
  SECTION("batch 64 at 16k tokens, 16 new tokens: whole sequences first, over two waves") {
    const DecodeShape s = llama_shape(std::vector<int64_t>(64, 16384), 16);
    const DecodeLaunchPlan p = plan_decode_launch(s, CacheKind::int8, 132);
    CHECK(p.mainloop == DecodeMainloop::wgmma);
    CHECK(p.heads_per_cta == 4);
    CHECK(p.head_chunks == 1);
    // 49 whole sequences fill 392 of the 396 slots, the other 15 in 3 splits each.
    CHECK(p.splits.total_splits() == 49 + 15 * 3);
    CHECK(p.ctas == 94 * 8);
    // Several sequences over more than one wave: each sequence's rows are combined once its own
    // CTAs are done, unless the grid is asked for.
    CHECK(p.combine == DecodeCombineWait::sequence);
    DecodeLaunchChoices grid;
    grid.combine = DecodeCombineWait::grid;
    CHECK(plan_decode_launch(s, CacheKind::int8, 132, grid).combine == DecodeCombineWait::grid);
  }
  SECTION("one sequence waits for the grid") {
    const DecodeLaunchPlan p = plan_decode_launch(llama_shape({128 * 1024}, 1), CacheKind::int8, 132);
    CHECK(p.splits.total_splits() == 49);  // 392 CTAs in one wave of 396
    CHECK(p.ctas == 392);
    CHECK(p.combine == DecodeCombineWait::grid);
  }
  SECTION("without cuts no combine runs, whatever was asked") {
    DecodeLaunchChoices whole;
    whole.tiles_per_split = 1000;
    whole.combine = DecodeCombineWait::sequence;
    const DecodeShape s = llama_shape(std::vector<int64_t>(8, 4096), 4);
    const DecodeLaunchPlan p = plan_decode_launch(s, CacheKind::fp16, 132, whole);
    CHECK_FALSE(p.splits.has_cuts());
    CHECK(p.ctas == 8 * 8);
    CHECK(p.combine == DecodeCombineWait::automatic);
  }
  SECTION("head chunks: 32 query heads per KV head x 16 new tokens are 4 CTAs of 128 rows") {
    DecodeShape s = decode_shape(64, 2, 128, {65536}, {16});
    validate_decode(s);
    const DecodeLaunchPlan p = plan_decode_launch(s, CacheKind::int8, 132);
    CHECK(p.heads_per_cta == 8);
    CHECK(p.head_chunks == 4);
    CHECK(p.cta_rows == 128);
    CHECK(p.mainloop == DecodeMainloop::mma_sync);
    CHECK(p.ctas == p.splits.total_splits() * 2 * 4);
  }
}

TEST_CASE("a launch plan's splits: fixed, given, or sized by waves and balanced by route", "[decode]") {
  const DecodeShape s = llama_shape({16384, 16384, 3000, 65}, 16);
  DecodeLaunchChoices fixed;
  fixed.tiles_per_split = 7;
  const DecodeLaunchPlan f = plan_decode_launch(s, CacheKind::int8, 132, fixed);
  CHECK(f.splits.split_offset == fixed_decode_split_plan(s, 7).split_offset);
  CHECK(f.splits.first_tile.empty());

  DecodeLaunchChoices given;
  given.splits = fixed_decode_split_plan(s, 300);
  given.splits->split_offset = {0, 1, 2, 3, 4};  // every sequence whole
  const DecodeLaunchPlan g = plan_decode_launch(s, CacheKind::int8, 132, given);
  CHECK(g.splits.split_offset == given.splits->split_offset);
  CHECK(g.ctas == 4 * 8);
  CHECK(g.combine == DecodeCombineWait::automatic);

  // Sized by waves of the plan's own resident CTAs.
  const DecodeLaunchPlan sized = plan_decode_launch(s, CacheKind::int8, 132);
  CHECK(sized.splits.split_offset == make_decode_split_plan(s, 132, sized.resident_ctas).split_offset);
  REQUIRE(sized.splits.has_cuts());

  // With routing, the wgmma kernel's cuts move by route cost; the mma.sync kernel's routes cost
  // alike, so its cuts stay uniform.
  RoutingRequest request;
  request.layout = LayoutKind::sptrans;
  request.ratio = 0.5;
  request.geometry = kDecodeGeometry;
  const RoutingPlan routing = make_plan(s.attention_shape(), request);
  const DecodeLaunchPlan balanced = plan_decode_launch(s, CacheKind::int8, 132, {}, &routing);
  REQUIRE(balanced.mainloop == DecodeMainloop::wgmma);
  CHECK(balanced.splits.split_offset == sized.splits.split_offset);
  CHECK_FALSE(balanced.splits.first_tile.empty());
  CHECK(balanced.splits.fits(s));
  const DecodeLaunchPlan uniform =
      plan_decode_launch(s, CacheKind::int8, 132, with_mainloop(DecodeMainloop::mma_sync), &routing);
  CHECK(uniform.splits.first_tile.empty());
  CHECK(plan_decode_launch(s, CacheKind::fp16, 132, {}, &routing).splits.first_tile.empty());
}
