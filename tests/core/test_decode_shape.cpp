#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/config/experiment.hpp"
#include "core/decode/decode_case.hpp"
#include "core/decode/decode_shape.hpp"
#include "core/error.hpp"
#include "tests/reference/attention_fixtures.hpp"
#include "tilemix/decode.hpp"

using namespace tilemix;
using namespace tilemix::testing;
using Catch::Matchers::Contains;

namespace {

std::string validate_error(DecodeShape s) {
  try {
    validate_decode(s, "case");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

ExperimentConfig parse(const std::string& text) {
  return parse_config(nlohmann::ordered_json::parse(text), "test.json");
}

std::string parse_error(const std::string& text) {
  try {
    parse(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

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

TEST_CASE("decode shape as an attention shape", "[decode]") {
  DecodeShape s = decode_shape(8, 2, 128, {1, 63, 64, 3000}, {1, 4, 16, 2});
  validate_decode(s);
  CHECK(s.batch() == 4);
  CHECK(s.total_new() == 23);
  CHECK(s.softmax_scale == 1.0f / std::sqrt(128.0f));
  const AttentionShape a = s.attention_shape();
  CHECK(a.causal);
  CHECK(a.hq == 8);
  CHECK(a.hk == 2);
  CHECK(a.d == 128);
  CHECK(a.softmax_scale == s.softmax_scale);
  CHECK(a.cu_seqlens_q == std::vector<int64_t>{0, 1, 5, 21, 23});
  CHECK(a.cu_seqlens_k == std::vector<int64_t>{0, 1, 64, 128, 3128});
  // Bottom-right causal: the first new token of sequence 2 sees the 48 cached tokens and itself.
  CHECK(visible_keys(0, 16, 64, true) == 49);

  DecodeShape scaled = decode_shape(4, 4, 64, {5}, {5});
  scaled.softmax_scale = 0.5f;
  validate_decode(scaled);
  CHECK(scaled.softmax_scale == 0.5f);
}

TEST_CASE("bad decode shapes name the field", "[decode]") {
  CHECK_THAT(validate_error(decode_shape(8, 3, 128, {10}, {1})), Contains("case.hk: hq % hk must be 0"));
  CHECK_THAT(validate_error(decode_shape(8, 2, 96, {10}, {1})), Contains("case.d: unsupported head dimension 96"));
  CHECK_THAT(validate_error(decode_shape(8, 2, 64, {10, 10}, {1, 0})),
             Contains("case.new_tokens[1]: must be in [1, 16]"));
  CHECK_THAT(validate_error(decode_shape(8, 2, 64, {100}, {17})),
             Contains("case.new_tokens[0]: must be in [1, 16], got 17"));
  CHECK_THAT(validate_error(decode_shape(8, 2, 64, {4, 3}, {4, 4})),
             Contains("case.cache_len[1]: must hold at least the 4 new tokens, got 3"));
  CHECK_THAT(validate_error(decode_shape(8, 2, 64, {}, {})), Contains("case.cache_len: needs at least one sequence"));
  CHECK_THAT(validate_error(decode_shape(8, 2, 64, {4, 4}, {1})), Contains("case.new_tokens: has 1 entries"));
  DecodeShape bad_scale = decode_shape(8, 2, 64, {4}, {1});
  bad_scale.softmax_scale = -1.0f;
  CHECK_THAT(validate_error(bad_scale), Contains("case.softmax_scale"));
}

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
    CHECK(decode_head_chunks(32, 2, 16) == 2);
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

TEST_CASE("append chunks: context in near-equal chunks, then the new tokens", "[decode]") {
  const DecodeShape s = decode_shape(8, 2, 64, {1, 63, 64, 3000}, {1, 4, 16, 4});
  CHECK(append_chunks(s, 1) == std::vector<std::vector<int64_t>>{{1, 63, 64, 3000}});
  CHECK(append_chunks(s, 2) == std::vector<std::vector<int64_t>>{{0, 59, 48, 2996}, {1, 4, 16, 4}});
  // Context 59 in three chunks: floor(59 (i+1) / 3) - floor(59 i / 3) = 19, 20, 20.
  const auto three = append_chunks(s, 4);
  REQUIRE(three.size() == 4);
  CHECK(three[0] == std::vector<int64_t>{0, 19, 16, 998});
  CHECK(three[1] == std::vector<int64_t>{0, 20, 16, 999});
  CHECK(three[2] == std::vector<int64_t>{0, 20, 16, 999});
  CHECK(three[3] == std::vector<int64_t>{1, 4, 16, 4});
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

TEST_CASE("a sequence with one split takes all its tiles", "[decode]") {
  DecodeShape s = decode_shape(8, 2, 64, {3000, 3000, 65}, {1, 1, 1});
  validate_decode(s);
  DecodeSplitPlan p = fixed_decode_split_plan(s, 8);  // 6, 6 and 1 splits
  CHECK(p.fits(s));
  p.split_offset = {0, 1, 7, 8};  // the first sequence whole
  check_covers_every_tile(s, p);
  CHECK(p.tile_range(0, 0, 47) == std::pair<int64_t, int64_t>{0, 47});
  CHECK(p.tile_range(1, 5, 47) == std::pair<int64_t, int64_t>{40, 47});
  p.split_offset = {0, 2, 8, 9};  // 2 splits of 8 tiles do not cover 47
  CHECK_FALSE(p.fits(s));
  p.split_offset = {0, 1, 7};  // another batch
  CHECK_FALSE(p.fits(s));
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

TEST_CASE("decode mainloop and resident CTAs per configuration", "[decode]") {
  using gpu::DecodeCache;
  const auto resolve = [](DecodeMainloop m, DecodeCache c, int d, int rows) {
    return gpu::decode_mainloop(m, c, d, rows);
  };
  // Automatic: wgmma for 33-64 rows of the INT8 cache at d = 128 only.
  CHECK(resolve(DecodeMainloop::automatic, DecodeCache::int8, 128, 4) == DecodeMainloop::mma_sync);
  CHECK(resolve(DecodeMainloop::automatic, DecodeCache::int8, 128, 32) == DecodeMainloop::mma_sync);
  CHECK(resolve(DecodeMainloop::automatic, DecodeCache::int8, 128, 33) == DecodeMainloop::wgmma);
  CHECK(resolve(DecodeMainloop::automatic, DecodeCache::int8, 128, 64) == DecodeMainloop::wgmma);
  CHECK(resolve(DecodeMainloop::automatic, DecodeCache::int8, 128, 128) == DecodeMainloop::mma_sync);
  CHECK(resolve(DecodeMainloop::automatic, DecodeCache::int8, 64, 64) == DecodeMainloop::mma_sync);
  CHECK(resolve(DecodeMainloop::automatic, DecodeCache::fp16, 128, 64) == DecodeMainloop::mma_sync);
  CHECK(resolve(DecodeMainloop::wgmma, DecodeCache::int8, 128, 8) == DecodeMainloop::wgmma);
  CHECK(resolve(DecodeMainloop::mma_sync, DecodeCache::int8, 128, 64) == DecodeMainloop::mma_sync);
  CHECK(gpu::decode_wgmma_applies(DecodeCache::int8, 128, 64));
  CHECK_FALSE(gpu::decode_wgmma_applies(DecodeCache::int8, 128, 65));
  CHECK_FALSE(gpu::decode_wgmma_applies(DecodeCache::fp16, 128, 64));
  // Hq = 32, Hk = 8: 4 rows per new token. The split plan sizes its waves with these.
  CHECK(gpu::decode_resident_ctas(true, 128, 32, 8, 1) == 3);    // mma.sync, 8-row tile
  CHECK(gpu::decode_resident_ctas(true, 128, 32, 8, 4) == 3);    // mma.sync, 16 rows
  CHECK(gpu::decode_resident_ctas(true, 128, 32, 8, 8) == 2);    // mma.sync, 32 rows
  CHECK(gpu::decode_resident_ctas(true, 128, 32, 8, 16) == 3);   // wgmma, 64 rows
  CHECK(gpu::decode_resident_ctas(true, 128, 32, 8, 16, DecodeMainloop::mma_sync) == 2);
  CHECK(gpu::decode_resident_ctas(false, 128, 32, 8, 1) == 2);   // FP16 cache
}

TEST_CASE("decode cases in configs", "[decode]") {
  SECTION("keys and defaults") {
    const auto cfg = parse(R"({"defaults": {"kind": "decode", "hq": 8, "hk": 2, "d": 64},
      "cases": [{"name": "eq", "cache_len": 100, "batch": 3},
                {"name": "var", "cache_lens": [1, 64, 65], "new_tokens": [1, 16, 4], "cache": "fp16",
                 "append_steps": 5, "softmax_scale": 0.25, "tiles_per_split": 7, "mainloop": "wgmma",
                 "combine": "sequence"},
                {"name": "routed", "cache_len": 300, "new_tokens": 16, "layout": "band", "ratio": 0.5, "seed": 4,
                 "group": 2, "input": {"kind": "llm_like"}}]})");
    REQUIRE(cfg.cases.size() == 3);
    const CaseSpec& eq = cfg.cases[0];
    REQUIRE(eq.decode);
    CHECK(eq.decode->shape.cache_len == std::vector<int64_t>{100, 100, 100});
    CHECK(eq.decode->shape.new_tokens == std::vector<int64_t>{1, 1, 1});
    CHECK(eq.decode->cache == CacheKind::int8);
    CHECK(eq.decode->append_steps == 2);
    CHECK(eq.decode->tiles_per_split == 0);
    CHECK(eq.decode->mainloop == DecodeMainloop::automatic);
    CHECK(eq.decode->combine == DecodeCombineWait::automatic);
    CHECK(eq.decode->shape.softmax_scale == 0.125f);
    CHECK(eq.shape.causal);
    CHECK(eq.shape.cu_seqlens_k == std::vector<int64_t>{0, 100, 200, 300});
    CHECK(eq.routing.geometry.block_m == kDecodeGeometry.block_m);
    CHECK(eq.routing.geometry.block_n == kDecodeGeometry.block_n);
    const CaseSpec& var = cfg.cases[1];
    CHECK(var.decode->shape.cache_len == std::vector<int64_t>{1, 64, 65});
    CHECK(var.decode->shape.new_tokens == std::vector<int64_t>{1, 16, 4});
    CHECK(var.decode->cache == CacheKind::fp16);
    CHECK(var.decode->append_steps == 5);
    CHECK(var.decode->tiles_per_split == 7);
    CHECK(var.decode->mainloop == DecodeMainloop::wgmma);
    CHECK(var.decode->combine == DecodeCombineWait::sequence);
    CHECK(var.shape.softmax_scale == 0.25f);
    const CaseSpec& routed = cfg.cases[2];
    CHECK(routed.decode->shape.new_tokens == std::vector<int64_t>{16});
    CHECK(routed.routing.layout == LayoutKind::band);
    CHECK(routed.routing.group == 2);
    CHECK(routed.input.kind == InputKind::llm_like);
    CHECK(routed.input.seed == 4);

    const auto prefill = parse(R"({"defaults": {"seq_len": 64}})");
    CHECK_FALSE(prefill.cases[0].decode);
  }
  SECTION("a decode layer's lengths replace prefill lengths of the defaults, and back") {
    const auto cfg = parse(R"({"defaults": {"seq_len": 64, "batch": 2},
      "cases": [{"name": "d", "kind": "decode", "cache_lens": [5, 6]}, {"name": "p"}],
      "axes": {"d": [64]}})");
    CHECK(cfg.cases[0].decode->shape.cache_len == std::vector<int64_t>{5, 6});
    CHECK_FALSE(cfg.cases[1].decode);
    const auto axis = parse(R"({"defaults": {"kind": "decode", "cache_len": 8}, "axes": {"cache_len": [16, 32]}})");
    CHECK(axis.cases[1].decode->shape.cache_len == std::vector<int64_t>{32});
  }
  SECTION("errors name the key and where it was written") {
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 8, "causal": true}]})"),
               Contains("test.json: $.cases[0].causal: is a prefill key; this case has \"kind\": \"decode\""));
    CHECK_THAT(parse_error(R"({"defaults": {"state": "fp16"}, "cases": [{"kind": "decode", "cache_len": 8}]})"),
               Contains("test.json: $.defaults.state: is a prefill key"));
    CHECK_THAT(parse_error(R"({"defaults": {"block_n": 64}, "cases": [{"kind": "decode", "cache_len": 8}]})"),
               Contains("$.defaults.block_n: is a prefill key"));
    CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 8, "new_tokens": 2}]})"),
               Contains("test.json: $.cases[0].new_tokens: is only used in decode cases (\"kind\": \"decode\")"));
    CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 8, "append_steps": 2}]})"),
               Contains("$.cases[0].append_steps: is only used in decode cases"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "prefill", "seq_len": 8, "cache": "int8"}]})"),
               Contains("$.cases[0].cache: is only used in decode cases"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "encode", "seq_len": 8}]})"),
               Contains("$.cases[0].kind: unknown kind 'encode' (expected one of: prefill, decode, model)"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode"}]})"),
               Contains("test.json: $.cases[0]: cache lengths are required for a decode case"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 8, "seq_len": 8}]})"),
               Contains("cannot be combined with"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_lens": [8], "batch": 2}]})"),
               Contains("$.cases[0].batch: cannot be combined with cache_lens"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_lens": [8, 0]}]})"),
               Contains("$.cases[0].cache_lens[1]: must be >= 1"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_lens": [8, -3]}]})"),
               Contains("$.cases[0].cache_lens[1]: negative sequence length -3"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 8, "new_tokens": 17}]})"),
               Contains("$.cases[0].new_tokens: must be in [1, 16], got 17"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_lens": [8, 3], "new_tokens": [1, 4]}]})"),
               Contains("$.cases[0].new_tokens[1]: is 4 but sequence 1 caches only 3 tokens"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_lens": [8, 3], "new_tokens": [1]}]})"),
               Contains("$.cases[0].new_tokens: has 1 counts but the case has 2 sequences"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 8, "new_tokens": "2"}]})"),
               Contains("$.cases[0].new_tokens: expected integer or array of integers, got string"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 8, "cache": "int4"}]})"),
               Contains("$.cases[0].cache: unknown cache 'int4' (expected one of: int8, fp16)"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 8, "append_steps": 0}]})"),
               Contains("$.cases[0].append_steps: must be in [1, "));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 8, "tiles_per_split": -1}]})"),
               Contains("$.cases[0].tiles_per_split: must be in [0, "));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 8, "mainloop": "tcgen05"}]})"),
               Contains("$.cases[0].mainloop: unknown mainloop 'tcgen05' (expected one of: auto, mma_sync, wgmma)"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 8, "combine": "atomic"}]})"),
               Contains("$.cases[0].combine: unknown combine 'atomic' (expected one of: auto, grid, sequence)"));
    CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 8, "combine": "grid"}]})"),
               Contains("$.cases[0].combine: is only used in decode cases"));
    CHECK_THAT(parse_error(R"({"cases": [{"seq_len": 8, "mainloop": "wgmma"}]})"),
               Contains("$.cases[0].mainloop: is only used in decode cases"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 8, "cache": "fp16", "layout": "one"}]})"),
               Contains("$.cases[0].layout: must be zero with cache fp16"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 8, "hk": 3}]})"),
               Contains("$.cases[0].hk: hq % hk must be 0"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 8, "d": 80}]})"),
               Contains("$.cases[0].d: unsupported head dimension 80"));
    CHECK_THAT(parse_error(R"({"cases": [{"kind": "decode", "cache_len": 8, "cach": "fp16"}]})"),
               Contains("$.cases[0].cach: unknown key 'cach'"));
  }
}

TEST_CASE("prepare_decode fills both caches with the source tokens in the case's chunks", "[decode]") {
  const auto cfg = parse(R"({"cases": [{"kind": "decode", "hq": 4, "hk": 2, "d": 64, "cache_lens": [1, 63, 64, 65, 300],
    "new_tokens": [1, 4, 16, 16, 2], "append_steps": 3, "layout": "band", "ratio": 0.5, "input": {"seed": 9}}]})");
  const PreparedDecode pd = prepare_decode(cfg.cases[0]);
  CHECK(pd.q.size() == 39u * 4 * 64);
  CHECK(pd.k_src.size() == 493u * 2 * 64);
  REQUIRE(pd.append_counts.size() == 3);
  CHECK(pd.append_counts.back() == std::vector<int64_t>{1, 4, 16, 16, 2});
  CHECK(pd.int8.layout.length == pd.shape.cache_len);
  CHECK(pd.fp16.layout.length == pd.shape.cache_len);
  const size_t row = 2 * 64;
  const std::vector<int64_t> cu = prefix_sums(pd.shape.cache_len);
  for (int b = 0; b < pd.shape.batch(); ++b) {
    const size_t src = static_cast<size_t>(cu[b]) * row, dst = static_cast<size_t>(pd.fp16.layout.cu_capacity[b]) * row;
    REQUIRE(std::equal(&pd.k_src[src], &pd.k_src[src] + pd.shape.cache_len[b] * row, &pd.fp16.k[dst]));
  }
  CHECK(pd.plan.tilings.size() == 5);
  CHECK(pd.plan.tilings[4].geometry.block_n == kDecodeGeometry.block_n);
  CHECK(pd.plan.tilings[4].tm == 1);
  CHECK(pd.plan.coverage.groups() > 0.0);
}
