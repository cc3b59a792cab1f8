// The plan columns of the decode bench's rows (mainloop, splits, combine) are those of the launch
// plan the row's call launched; the bench's calls need a GPU, so the plans are made here for an
// H200's 132 multiprocessors.
#include <catch2/catch.hpp>

#include <vector>

#include "apps/bench/decode_run.hpp"
#include "core/decode/decode_shape.hpp"
#include "kernels/decode/plan.hpp"

using namespace tilemix;
using namespace tilemix::app;

namespace {

// The bench's decode shape (configs/bench/decode.json: Hq = 32, Hk = 8, d = 128).
DecodeShape bench_shape(int64_t cache_len, int batch, int64_t new_tokens) {
  DecodeShape s;
  s.hq = 32;
  s.hk = 8;
  s.d = 128;
  s.cache_len.assign(batch, cache_len);
  s.new_tokens.assign(batch, new_tokens);
  validate_decode(s);
  return s;
}

}  // namespace

TEST_CASE("a decode bench row's plan columns are its launch plan's", "[tables]") {
  SECTION("16k x 64, 16 new tokens: the wgmma kernel, whole sequences first, per-sequence combine") {
    const DecodeShape s = bench_shape(16384, 64, 16);
    const DecodePlanColumns int8 = decode_plan_columns(plan_decode_launch(s, CacheKind::int8, 132));
    CHECK(int8.mainloop == DecodeMainloop::wgmma);
    CHECK(int8.total_splits == 49 + 15 * 3);
    CHECK(int8.combine == "sequence");
    // The FP16 cache's kernel keeps two CTAs per multiprocessor: its own splits.
    const DecodeLaunchPlan fp16_plan = plan_decode_launch(s, CacheKind::fp16, 132);
    const DecodePlanColumns fp16 = decode_plan_columns(fp16_plan);
    CHECK(fp16.mainloop == DecodeMainloop::mma_sync);
    CHECK(fp16.total_splits == fp16_plan.splits.total_splits());
    CHECK(fp16.total_splits != int8.total_splits);
  }
  SECTION("a config's choices reach the columns through the plan") {
    DecodeLaunchChoices choices;
    choices.mainloop = DecodeMainloop::mma_sync;
    choices.combine = DecodeCombineWait::grid;
    choices.tiles_per_split = 64;
    const DecodePlanColumns c =
        decode_plan_columns(plan_decode_launch(bench_shape(16384, 8, 16), CacheKind::int8, 132, choices));
    CHECK(c.mainloop == DecodeMainloop::mma_sync);
    CHECK(c.total_splits == 8 * 4);
    CHECK(c.combine == "grid");
  }
  SECTION("no sequence cut: no combine") {
    DecodeLaunchChoices whole;
    whole.tiles_per_split = 16;
    const DecodePlanColumns c =
        decode_plan_columns(plan_decode_launch(bench_shape(1024, 64, 1), CacheKind::int8, 132, whole));
    CHECK(c.mainloop == DecodeMainloop::mma_sync);
    CHECK(c.total_splits == 64);
    CHECK(c.combine == "none");
  }
}
