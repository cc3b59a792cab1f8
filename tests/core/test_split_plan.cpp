#include <catch2/catch.hpp>

#include <utility>
#include <vector>

#include "core/decode/decode_shape.hpp"
#include "core/decode/split_plan.hpp"
#include "tests/reference/attention_fixtures.hpp"

using namespace tilemix;
using namespace tilemix::testing;

namespace {

// Uniform cuts of 8 tiles over sequences of 47, 47 and 2 key tiles: 6, 6 and 1 splits.
DecodeSplitPlan eight_tile_splits() {
  DecodeSplitPlan p;
  p.tiles_per_split = 8;
  p.split_offset = {0, 6, 12, 13};
  return p;
}

}  // namespace

TEST_CASE("a sequence with one split takes all its tiles", "[decode]") {
  DecodeShape s = decode_shape(8, 2, 64, {3000, 3000, 65}, {1, 1, 1});
  validate_decode(s);
  DecodeSplitPlan p = eight_tile_splits();
  CHECK(p.fits(s));
  CHECK(p.tile_range(1, 5, 47) == std::pair<int64_t, int64_t>{40, 47});
  p.split_offset = {0, 1, 7, 8};  // the first sequence whole
  REQUIRE(p.fits(s));
  CHECK(p.tile_range(0, 0, 47) == std::pair<int64_t, int64_t>{0, 47});
  CHECK(p.tile_range(1, 5, 47) == std::pair<int64_t, int64_t>{40, 47});
  CHECK(p.first_tiles(s) == std::vector<int32_t>{0, 0, 8, 16, 24, 32, 40, 0});
  p.split_offset = {0, 2, 8, 9};  // 2 splits of 8 tiles do not cover 47
  CHECK_FALSE(p.fits(s));
  p.split_offset = {0, 1, 7};  // another batch
  CHECK_FALSE(p.fits(s));
}

TEST_CASE("a split plan has cuts where some sequence has more than one split", "[decode]") {
  DecodeShape s = decode_shape(8, 2, 64, {3000, 3000, 65}, {1, 1, 1});
  validate_decode(s);
  DecodeSplitPlan p = eight_tile_splits();
  CHECK(p.total_splits() == 13);
  CHECK(p.has_cuts());
  p.split_offset = {0, 1, 2, 3};  // every sequence whole
  REQUIRE(p.fits(s));
  CHECK(p.total_splits() == 3);
  CHECK_FALSE(p.has_cuts());
  p.split_offset = {0, 1, 7, 8};  // the second sequence cut
  REQUIRE(p.fits(s));
  CHECK(p.has_cuts());
}

TEST_CASE("explicit cuts partition each sequence's tiles", "[decode]") {
  DecodeShape s = decode_shape(8, 2, 64, {3000, 65}, {1, 1});  // 47 and 2 tiles
  validate_decode(s);
  DecodeSplitPlan p;
  p.tiles_per_split = 16;  // nominal: the cuts are explicit
  p.split_offset = {0, 3, 4};
  p.first_tile = {0, 20, 30, 0};
  REQUIRE(p.fits(s));
  CHECK(p.tile_range(0, 0, 47) == std::pair<int64_t, int64_t>{0, 20});
  CHECK(p.tile_range(0, 1, 47) == std::pair<int64_t, int64_t>{20, 30});
  CHECK(p.tile_range(0, 2, 47) == std::pair<int64_t, int64_t>{30, 47});
  CHECK(p.tile_range(1, 0, 2) == std::pair<int64_t, int64_t>{0, 2});
  CHECK(p.first_tiles(s) == std::vector<int32_t>{0, 20, 30, 0});
  DecodeSplitPlan bad = p;
  bad.first_tile = {0, 30, 20, 0};  // cuts out of order
  CHECK_FALSE(bad.fits(s));
  bad.first_tile = {0, 20, 47, 0};  // a split past the sequence's last tile
  CHECK_FALSE(bad.fits(s));
  bad.first_tile = {0, 20, 30};  // not one first tile per split
  CHECK_FALSE(bad.fits(s));
}
