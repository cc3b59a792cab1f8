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
