#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/decode/decode_shape.hpp"
#include "kernels/decode/plan.hpp"
#include "tests/reference/attention_fixtures.hpp"

using namespace tilemix;
using namespace tilemix::testing;

namespace {

// Every key tile of every sequence lies in exactly one split, splits in ascending order.
void check_covers_every_tile(const DecodeShape& s, const DecodeSplitPlan& p) {
  REQUIRE(p.split_offset.size() == s.cache_len.size() + 1);
  REQUIRE(p.split_offset.front() == 0);
  REQUIRE(p.fits(s));
  for (int b = 0; b < s.batch(); ++b) {
    const int64_t tiles = (s.cache_len[b] + 63) / 64;
    std::vector<int> owner(static_cast<size_t>(tiles), 0);
    for (int split = 0; split < p.splits(b); ++split) {
      const auto [first, last] = p.tile_range(b, split, tiles);
      REQUIRE(first < last);  // no empty split
      for (int64_t n = first; n < last; ++n) ++owner[n];
    }
    for (int o : owner) REQUIRE(o == 1);
  }
}

}  // namespace

TEST_CASE("split plan covers every key tile once and keeps the last wave nearly full", "[decode]") {
  SECTION("batch 1 at 128k tokens, hk 8, 3 CTAs per multiprocessor: one wave of 392 CTAs") {
    DecodeShape s = decode_shape(32, 8, 128, {128 * 1024}, {1});
    validate_decode(s);
    const DecodeSplitPlan p = make_decode_split_plan(s, 132, 3);
    check_covers_every_tile(s, p);
    // 42 tiles: ceil(2048 / 42) = 49 splits, 392 CTAs <= 396 slots; 41 tiles would need 400.
    CHECK(p.tiles_per_split == 42);
    CHECK(p.total_splits() == 49);
  }
  SECTION("batch 64 at 16k tokens: a wave of whole sequences, then the rest in 86-tile splits") {
    DecodeShape s = decode_shape(32, 8, 128, std::vector<int64_t>(64, 16384), std::vector<int64_t>(64, 1));
    validate_decode(s);
    const DecodeSplitPlan p = make_decode_split_plan(s, 132, 3);
    check_covers_every_tile(s, p);
    // 49 whole sequences are 392 CTAs of the 396 slots; the other 15 in 3 splits are 360 CTAs
    // that start as the first wave ends. Not 1.29 waves of whole sequences (the last wave 29%
    // full), and cheaper in the model than 3.88 waves of 86-tile splits of every sequence.
    CHECK(p.tiles_per_split == 86);
    std::vector<int64_t> counts(64, 1);
    std::fill(counts.begin() + 49, counts.end(), 3);
    CHECK(p.split_offset == prefix_sums(counts));
    // Two CTAs per multiprocessor: 512 whole sequences are 1.94 waves, already nearly full.
    CHECK(make_decode_split_plan(s, 132, 2).total_splits() == 64);
  }
  SECTION("head chunks count as CTAs: 16 new tokens x 16 heads per KV head = 2 chunks") {
    DecodeShape s = decode_shape(32, 2, 128, {65536}, {16});
    validate_decode(s);
    CHECK(plan_decode_launch(s, CacheKind::int8, 132).head_chunks == 2);
    const DecodeSplitPlan p = make_decode_split_plan(s, 132, 2);
    check_covers_every_tile(s, p);
    // 4 CTAs per split on 264 slots: 66 splits of 16 tiles.
    CHECK(p.tiles_per_split == 16);
    CHECK(4 * p.total_splits() <= 264);
  }
  SECTION("short caches keep the minimum tiles per split") {
    DecodeShape s = decode_shape(8, 2, 128, {1, 63, 64, 65, 3000}, {1, 4, 16, 16, 4});
    validate_decode(s);
    const DecodeSplitPlan p = make_decode_split_plan(s, 132, 3);
    check_covers_every_tile(s, p);
    CHECK(p.tiles_per_split == 4);
    CHECK(p.split_offset == std::vector<int64_t>{0, 1, 2, 3, 4, 16});
    CHECK(make_decode_split_plan(s, 132, 3, 1).tiles_per_split == 1);
    CHECK(make_decode_split_plan(s, 132, 3, 16).tiles_per_split == 16);
  }
  SECTION("any multiprocessor count and residency") {
    for (int sm : {1, 46, 78, 132, 144}) {
      for (int ctas : {1, 2, 3}) {
        for (int hk : {1, 2, 8}) {
          DecodeShape s = decode_shape(8 * hk, hk, 64, {16384, 1, 70000, 4096, 129}, {16, 1, 4, 1, 16});
          validate_decode(s);
          const DecodeSplitPlan p = make_decode_split_plan(s, sm, ctas);
          check_covers_every_tile(s, p);
          CHECK(p.tiles_per_split >= 4);
          // The same shape always gives the same plan.
          CHECK(make_decode_split_plan(s, sm, ctas).split_offset == p.split_offset);
        }
      }
    }
  }
  DecodeShape s = decode_shape(8, 2, 64, {10}, {1});
  validate_decode(s);
  CHECK_THROWS_AS(make_decode_split_plan(s, 0, 3), std::invalid_argument);
  CHECK_THROWS_AS(make_decode_split_plan(s, 132, 0), std::invalid_argument);
  CHECK_THROWS_AS(make_decode_split_plan(s, 132, 3, 0), std::invalid_argument);
}

TEST_CASE("fixed split plans cut every sequence into equal runs of tiles", "[decode]") {
  DecodeShape s = decode_shape(8, 2, 64, {1, 64, 65, 3000}, {1, 1, 1, 1});
  validate_decode(s);
  const DecodeSplitPlan p = fixed_decode_split_plan(s, 5);
  check_covers_every_tile(s, p);
  CHECK(p.tiles_per_split == 5);
  // 1, 1, 2 and 47 tiles: 1, 1, 1 and 10 splits (the last one 2 tiles).
  CHECK(p.split_offset == std::vector<int64_t>{0, 1, 2, 3, 13});
  CHECK(p.tile_range(3, 9, 47) == std::pair<int64_t, int64_t>{45, 47});
  CHECK_THROWS_AS(fixed_decode_split_plan(s, 0), std::invalid_argument);
}

TEST_CASE("balanced split cuts equalize the cost of a sequence's splits", "[decode]") {
  DecodeShape s = decode_shape(8, 2, 64, {4096, 4096, 65, 640}, {1, 1, 1, 1});  // 64, 64, 2, 10 tiles
  validate_decode(s);
  DecodeSplitPlan p = fixed_decode_split_plan(s, 16);  // 4, 4, 1 and 1 splits
  p.split_offset = {0, 4, 8, 9, 12};                   // the last sequence in 3 splits of 4, 4, 2
  // Sequence 1: its last 32 tiles cost 3 each (an FP16 tail); the others cost alike.
  const auto cost = [](int b, int64_t t) { return b == 1 && t >= 32 ? 3.0 : 1.0; };
  balance_decode_splits(p, s, cost);
  REQUIRE(p.fits(s));
  check_covers_every_tile(s, p);
  SECTION("costs alike cut into near-equal runs") {
    CHECK(p.first_tile[0] == 0);
    CHECK(p.first_tile[1] == 16);
    CHECK(p.first_tile[2] == 32);
    CHECK(p.first_tile[3] == 48);
    CHECK(p.tile_range(2, 0, 2) == std::pair<int64_t, int64_t>{0, 2});  // one split: all tiles
    // 10 tiles in 3: cuts nearest 10/3 and 20/3.
    CHECK(p.tile_range(3, 0, 10) == std::pair<int64_t, int64_t>{0, 3});
    CHECK(p.tile_range(3, 1, 10) == std::pair<int64_t, int64_t>{3, 7});
    CHECK(p.tile_range(3, 2, 10) == std::pair<int64_t, int64_t>{7, 10});
  }
  SECTION("an expensive tail gets shorter splits") {
    // Total cost 32 + 96 = 128: a quarter each, so cuts at 32, 32 + 32/3 and 32 + 64/3 tiles.
    CHECK(p.tile_range(1, 0, 64) == std::pair<int64_t, int64_t>{0, 32});
    CHECK(p.tile_range(1, 1, 64) == std::pair<int64_t, int64_t>{32, 43});
    CHECK(p.tile_range(1, 2, 64) == std::pair<int64_t, int64_t>{43, 53});
    CHECK(p.tile_range(1, 3, 64) == std::pair<int64_t, int64_t>{53, 64});
  }
  SECTION("the kernels' form of the plan lists every split's first tile") {
    CHECK(p.first_tiles(s) == std::vector<int32_t>{0, 16, 32, 48, 0, 32, 43, 53, 0, 0, 3, 7});
  }
  SECTION("explicit cuts that skip or repeat tiles do not fit") {
    DecodeSplitPlan bad = p;
    bad.first_tile[5] = 0;  // a second split starting at tile 0
    CHECK_FALSE(bad.fits(s));
    bad = p;
    bad.first_tile[7] = 64;  // a split past the sequence's last tile
    CHECK_FALSE(bad.fits(s));
    bad = p;
    bad.first_tile.pop_back();
    CHECK_FALSE(bad.fits(s));
  }
  SECTION("a split keeps at least one tile however the costs fall") {
    DecodeSplitPlan q = fixed_decode_split_plan(s, 16);
    balance_decode_splits(q, s, [](int, int64_t t) { return t == 0 ? 1e9 : 1.0; });
    REQUIRE(q.fits(s));
    CHECK(q.tile_range(0, 0, 64) == std::pair<int64_t, int64_t>{0, 1});
    CHECK_THROWS_AS(balance_decode_splits(q, s, [](int, int64_t) { return 0.0; }), std::invalid_argument);
  }
}

TEST_CASE("decode routes: what the words hold over the tiles of each sequence", "[decode]") {
  // hk = 2; 2 tiles (65 tokens), 1 tile, and 130 groups of one tile (past bit 63: FP16).
  DecodeShape s = decode_shape(4, 2, 64, {65, 64}, {1, 1});
  validate_decode(s);
  const std::vector<int> one_tile_groups = {1, 1};
  // [hk][batch]: only the bits of the tiles a sequence has count.
  CHECK(decode_routes(s, {0b11, 0b1, 0b11, 0b1}, one_tile_groups) == DecodeRoutes::all_int8);
  CHECK(decode_routes(s, {~0ull, ~0ull, ~0ull, ~0ull}, one_tile_groups) == DecodeRoutes::all_int8);
  CHECK(decode_routes(s, {0b100, 0b10, 0, ~1ull}, one_tile_groups) == DecodeRoutes::all_fp16);
  CHECK(decode_routes(s, {0b11, 0b1, 0b01, 0b1}, one_tile_groups) == DecodeRoutes::mixed);
  CHECK(decode_routes(s, {0, 0, 0, 0b1}, one_tile_groups) == DecodeRoutes::mixed);
  // Two tiles per group: sequence 0's tiles are both in bit 0.
  CHECK(decode_routes(s, {0b1, 0b1, 0b1, 0b1}, {2, 2}) == DecodeRoutes::all_int8);

  DecodeShape longer = decode_shape(4, 1, 64, {130 * 64}, {1});
  validate_decode(longer);
  CHECK(decode_routes(longer, {~0ull}, {1}) == DecodeRoutes::mixed);
  CHECK(decode_routes(longer, {~0ull}, {3}) == DecodeRoutes::all_int8);
  CHECK(decode_routes(longer, {0}, {1}) == DecodeRoutes::all_fp16);
  CHECK_THROWS_AS(decode_routes(longer, {0, 0}, {1}), std::invalid_argument);
  CHECK_THROWS_AS(decode_routes(longer, {0}, {0}), std::invalid_argument);
}
