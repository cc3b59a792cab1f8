#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/decode/decode_case.hpp"
#include "kernels/decode/plan.hpp"
#include "reference/decode_emulator.hpp"
#include "tests/reference/attention_fixtures.hpp"
#include "tests/reference/decode_fixtures.hpp"

using namespace tilemix;
using namespace tilemix::testing;

TEST_CASE("split-K: one split or many agree to the rounding of P and of the output", "[decode]") {
  const DecodeProblem p = make_problem(8, 2, 64, {1, 63, 64, 65, 2100}, {1, 4, 16, 16, 16}, LayoutKind::rowrand, 0.5,
                                       InputKind::llm_like, 7, 3);
  const PreparedDecode& pd = p.pd;
  const DecodeSplitPlan one_split = fixed_decode_split_plan(pd.shape, 1000);
  const DecodeResult single_int8 = emulate_decode_int8(pd.shape, pd.q, pd.int8, pd.plan, one_split);
  const DecodeResult single_fp16 = emulate_decode_fp16(pd.shape, pd.q, pd.fp16, one_split);
  for (int tiles_per_split : {1, 3, 4}) {
    const DecodeSplitPlan splits = fixed_decode_split_plan(pd.shape, tiles_per_split);
    const std::pair<DecodeResult, const DecodeResult*> runs[] = {
        {emulate_decode_int8(pd.shape, pd.q, pd.int8, pd.plan, splits), &single_int8},
        {emulate_decode_fp16(pd.shape, pd.q, pd.fp16, splits), &single_fp16}};
    for (const auto& [many, single] : runs) {
      // Each split rounds P to FP16 against its own running max, so outputs differ by FP16
      // rounding of P (averaged over the keys) and of o; l and m are fp32, so lse differs by
      // fp32 rounding only.
      const Deviation dev = compare(many.o, half_to_double(single->o));
      CHECK(dev.nonfinite == 0);
      CHECK(dev.rel_l2 < 2e-4);
      CHECK(dev.max_abs <= 8.0 * half_ulp(max_abs_value(half_to_double(single->o))));
      for (size_t i = 0; i < many.lse.size(); ++i) {
        REQUIRE(std::isfinite(many.lse[i]));
        REQUIRE(std::fabs(many.lse[i] - single->lse[i]) <= 1e-5f * (1.0f + std::fabs(single->lse[i])));
      }
    }
  }
}

TEST_CASE("split-K: a whole sequence beside cut ones gives each sequence its own plan's bits", "[decode]") {
  const DecodeProblem p = make_problem(8, 2, 64, {1, 63, 64, 65, 2100}, {1, 4, 16, 16, 16}, LayoutKind::rowrand, 0.5,
                                       InputKind::llm_like, 8, 3);
  const PreparedDecode& pd = p.pd;
  // Single-tile splits everywhere, and the same with the last sequence (33 tiles) kept whole.
  const DecodeSplitPlan cut = fixed_decode_split_plan(pd.shape, 1);
  DecodeSplitPlan mixed = cut;
  mixed.split_offset.back() = mixed.split_offset[4] + 1;
  REQUIRE(mixed.fits(pd.shape));
  const DecodeSplitPlan whole = fixed_decode_split_plan(pd.shape, 1000);
  const std::vector<int64_t> cu_new = prefix_sums(pd.shape.new_tokens);
  const size_t row_values = static_cast<size_t>(pd.shape.hq) * pd.shape.d;
  const size_t last_first = static_cast<size_t>(cu_new[4]) * row_values;
  const auto check = [&](const DecodeResult& got, const DecodeResult& as_cut, const DecodeResult& as_whole) {
    // Outputs [total_new, hq, d]: the first four sequences' rows as in `cut`, the last's as in `whole`.
    REQUIRE(got.o.size() == as_cut.o.size());
    CHECK(std::equal(got.o.begin(), got.o.begin() + last_first, as_cut.o.begin()));
    CHECK(std::equal(got.o.begin() + last_first, got.o.end(), as_whole.o.begin() + last_first));
    CHECK_FALSE(std::equal(as_cut.o.begin() + last_first, as_cut.o.end(), as_whole.o.begin() + last_first));
  };
  check(emulate_decode_int8(pd.shape, pd.q, pd.int8, pd.plan, mixed),
        emulate_decode_int8(pd.shape, pd.q, pd.int8, pd.plan, cut),
        emulate_decode_int8(pd.shape, pd.q, pd.int8, pd.plan, whole));
  check(emulate_decode_fp16(pd.shape, pd.q, pd.fp16, mixed), emulate_decode_fp16(pd.shape, pd.q, pd.fp16, cut),
        emulate_decode_fp16(pd.shape, pd.q, pd.fp16, whole));
}

TEST_CASE("split-K: the emulator combines the partial states of its launch plan's cuts", "[decode]") {
  // Two sequences of at most 4 key tiles, which every plan keeps whole, beside a long one, which
  // the launch plan for 132 multiprocessors cuts.
  const DecodeProblem p = make_problem(8, 2, 64, {65, 256, 8192}, {16, 1, 4}, LayoutKind::rowrand, 0.5,
                                       InputKind::llm_like, 9);
  const PreparedDecode& pd = p.pd;
  const DecodeLaunchPlan launch =
      plan_decode_launch(pd.shape, CacheKind::int8, 132, decode_launch_choices(*p.spec.decode), &pd.plan);
  REQUIRE(launch.splits.fits(pd.shape));
  REQUIRE(launch.splits.splits(2) > 2);
  const DecodeResult planned = emulate_decode_int8(pd.shape, pd.q, pd.int8, pd.plan, launch.splits);
  const DecodeResult whole =
      emulate_decode_int8(pd.shape, pd.q, pd.int8, pd.plan, fixed_decode_split_plan(pd.shape, 1000));
  // The same cut count with the last sequence's first cut a tile later.
  DecodeSplitPlan moved = launch.splits;
  moved.first_tile.clear();
  for (const int32_t first : launch.splits.first_tiles(pd.shape)) moved.first_tile.push_back(first);
  ++moved.first_tile[launch.splits.split_offset[2] + 1];
  REQUIRE(moved.fits(pd.shape));
  const DecodeResult shifted = emulate_decode_int8(pd.shape, pd.q, pd.int8, pd.plan, moved);

  // Outputs [total_new, hq, d]: the sequences the plan keeps whole have the bits of one split each;
  // each split of the cut one rounds its P against its own maximum, so its rows follow the cuts.
  const size_t first_cut = static_cast<size_t>(prefix_sums(pd.shape.new_tokens)[2]) * pd.shape.hq * pd.shape.d;
  const auto split_at = [&](const DecodeResult& r) { return r.o.begin() + static_cast<std::ptrdiff_t>(first_cut); };
  CHECK(std::equal(planned.o.begin(), split_at(planned), whole.o.begin()));
  CHECK_FALSE(std::equal(split_at(planned), planned.o.end(), split_at(whole)));
  CHECK_FALSE(std::equal(split_at(planned), planned.o.end(), split_at(shifted)));
  CHECK(std::equal(planned.o.begin(), split_at(planned), shifted.o.begin()));
}

TEST_CASE("decode emulator rejects plans, caches and splits of another shape", "[decode]") {
  const DecodeProblem p =
      make_problem(4, 2, 64, {100, 70}, {4, 2}, LayoutKind::one, 1.0, InputKind::gaussian, 9);
  const PreparedDecode& pd = p.pd;
  const DecodeSplitPlan splits = make_decode_split_plan(pd.shape, 132, 3);
  DecodeShape longer = pd.shape;
  longer.cache_len = {101, 70};
  CHECK_THROWS_AS(emulate_decode_int8(longer, pd.q, pd.int8, pd.plan, splits), std::invalid_argument);
  CHECK_THROWS_AS(emulate_decode_fp16(longer, pd.q, pd.fp16, splits), std::invalid_argument);
  RoutingRequest request;
  const RoutingPlan prefill_plan = make_plan(pd.shape.attention_shape(), request);  // 128 x 64 tiles
  CHECK_THROWS_AS(emulate_decode_int8(pd.shape, pd.q, pd.int8, prefill_plan, splits), std::invalid_argument);
  DecodeShape three_tiles = pd.shape;
  three_tiles.cache_len = {129, 70};
  CHECK_THROWS_AS(emulate_decode_int8(pd.shape, pd.q, pd.int8, pd.plan, fixed_decode_split_plan(three_tiles, 1)),
                  std::invalid_argument);
  DecodeSplitPlan short_splits = fixed_decode_split_plan(pd.shape, 1);
  short_splits.tiles_per_split = 2;  // two splits per sequence of 2 tiles: the second one is empty
  CHECK_THROWS_AS(emulate_decode_fp16(pd.shape, pd.q, pd.fp16, short_splits), std::invalid_argument);
  CHECK_THROWS_AS(emulate_decode_fp16(pd.shape, std::vector<uint16_t>(3), pd.fp16, splits), std::invalid_argument);
}
