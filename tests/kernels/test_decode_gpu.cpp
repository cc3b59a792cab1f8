// The decode kernels against the CPU side: kv_append bit for bit against append_tokens (codes,
// scales and FP16 tokens, partly filled blocks growing over several appends), and the split-K
// decode over the INT8 and the FP16 cache tightly against emulate_decode_int8 / _fp16 with the
// cuts of the same launch plans: cache lengths 1, 63, 64, 65 and 3000, new tokens 1 to 16, GQA 1 to 16 (head
// chunks past 128 query rows), d 64 and 128, layouts zero, one, band and sptrans; zero block
// scales and zero queries beside illegal keys; and a flipped routing bit is caught.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "apps/common/decode_gpu.hpp"
#include "core/config/experiment.hpp"
#include "core/decode/decode_case.hpp"
#include "core/problem.hpp"
#include "kernels/decode/plan.hpp"
#include "reference/decode_emulator.hpp"
#include "tests/kernels/gpu_checks.hpp"
#include "tests/reference/attention_fixtures.hpp"
#include "tilemix/decode.hpp"
#include "tilemix/device_buffer.hpp"
#include "tilemix/gpu.hpp"

using namespace tilemix;
using namespace tilemix::app;
using namespace tilemix::testing;

namespace {

PreparedDecode prepare(const DecodeShape& shape, LayoutKind layout, double ratio, InputKind input, uint64_t seed) {
  CaseSpec spec;
  spec.name = "decode";
  spec.where = "test";
  spec.shape = shape.attention_shape();
  spec.routing.layout = layout;
  spec.routing.ratio = ratio;
  spec.routing.seed = seed;
  spec.routing.geometry = kDecodeGeometry;
  spec.input.kind = input;
  spec.input.seed = seed;
  DecodeCaseSpec dc;
  dc.shape = shape;
  dc.append_steps = 3;  // partly filled blocks re-quantized on the way
  spec.decode = dc;
  return prepare_decode(spec);
}

// The INT8 cache's cuts on this device.
DecodeSplitPlan device_split_plan(const DecodeShape& shape) {
  return plan_decode_launch(shape, CacheKind::int8, gpu::device_info(0).sm_count).splits;
}

// The launch of `cache` on this device with the cuts `splits`.
DecodeLaunchPlan launch_of(const DecodeShape& shape, CacheKind cache, const DecodeSplitPlan& splits,
                           DecodeMainloop mainloop = DecodeMainloop::automatic,
                           DecodeCombineWait combine = DecodeCombineWait::automatic) {
  DecodeLaunchChoices choices;
  choices.mainloop = mainloop;
  choices.combine = combine;
  choices.splits = splits;
  return plan_decode_launch(shape, cache, gpu::device_info(0).sm_count, choices);
}

Agreement agreement(const DecodeOutput& got, const DecodeResult& want) {
  return compare_outputs(KernelOutput{got.o, got.lse}, EmulatorResult{want.o, want.lse});
}

struct Problem {
  const char* name;
  int hq, hk, d;
  std::vector<int64_t> cache_len, new_tokens;
  InputKind input;
};

// Query rows per CTA (query heads x max new tokens): 4 -> 8, 16, 32, 64, 128, and 256 (two head
// chunks). Cache lengths around one tile, and a long one with many tiles and splits.
const std::vector<Problem> kProblems = {
    {"MHA d64 varlen 1/63/64/65/3000", 4, 4, 64, {1, 63, 64, 65, 3000}, {1, 4, 16, 1, 16}, InputKind::gaussian},
    {"GQA4 d128 varlen, 64 rows", 8, 2, 128, {3000, 65, 1, 64, 63}, {16, 4, 1, 16, 4}, InputKind::llm_like},
    {"GQA8 d128, 128 rows", 8, 1, 128, {63, 3000, 64}, {4, 16, 16}, InputKind::gaussian},
    {"GQA4 d128 one new token (LLaMA-8B heads)", 32, 8, 128, {3000, 65, 1}, {1, 1, 1}, InputKind::llm_like},
    {"GQA4 d128 3 to 8 new tokens, 32 rows", 32, 8, 128, {1000, 8, 129, 3}, {3, 8, 5, 3}, InputKind::llm_like},
    {"GQA8 d64 four new tokens, 32 rows", 16, 2, 64, {65, 3000}, {4, 4}, InputKind::gaussian},
    {"GQA16 d64 two head chunks", 16, 1, 64, {3000, 64}, {16, 16}, InputKind::llm_like},
};

// A one-sequence problem (hk = 1, L = 128) with hand-made data: Q = e_0 in every row and both
// caches filled from the FP16 tokens k, v ([128, d]) by append_tokens.
PreparedDecode unit_query_problem(const DecodeShape& shape, LayoutKind layout, const std::vector<uint16_t>& k,
                                  const std::vector<uint16_t>& v) {
  PreparedDecode pd = prepare(shape, layout, layout == LayoutKind::one ? 1.0 : 0.0, InputKind::gaussian, 31);
  const int d = shape.d;
  std::fill(pd.q.begin(), pd.q.end(), uint16_t{0});
  for (size_t row = 0; row < pd.q.size() / d; ++row) pd.q[row * d] = float_to_half(1.0f);
  const KvCacheLayout empty = make_cache_layout(shape.hk, d, shape.cache_len);
  pd.int8 = make_int8_cache(empty);
  pd.fp16 = make_fp16_cache(empty);
  append_tokens(pd.int8, shape.cache_len, k, v);
  append_tokens(pd.fp16, shape.cache_len, k, v);
  return pd;
}

// Splits of `tiles_per_split` tiles, but the sequence with the most tiles in one split of all.
DecodeSplitPlan longest_whole(const DecodeShape& shape, int tiles_per_split) {
  DecodeSplitPlan plan = fixed_decode_split_plan(shape, tiles_per_split);
  const auto longest = std::max_element(shape.cache_len.begin(), shape.cache_len.end()) - shape.cache_len.begin();
  std::vector<int64_t> counts;
  for (int b = 0; b < shape.batch(); ++b) counts.push_back(b == longest ? 1 : plan.splits(b));
  plan.split_offset = prefix_sums(counts);
  return plan;
}

// 3-tile splits with the cuts moved by route: FP16-routed tiles (of any KV head) cost three INT8
// ones, so the splits over an FP16 tail are shorter and the cuts fall off the 3-tile grid.
DecodeSplitPlan balanced_by_route(const DecodeShape& shape, const RoutingPlan& plan) {
  DecodeSplitPlan splits = fixed_decode_split_plan(shape, 3);
  balance_decode_splits(splits, shape, [&](int b, int64_t tile) {
    for (int h = 0; h < shape.hk; ++h) {
      if (!plan.int8_route(h, b, 0, static_cast<int>(tile))) return 3.0;
    }
    return 1.0;
  });
  return splits;
}

}  // namespace

TEST_CASE("kv_append is bit-identical with append_tokens", "[gpu][decode]") {
  for (int d : {64, 128}) {
    INFO("d=" << d);
    const int hk = 2;
    const std::vector<int64_t> capacity = {1, 63, 64, 65, 300, 130};
    // Appends that start, fill and grow partial blocks: sequence 1 goes 40 -> 63, sequence 3
    // 30 -> 65 (its first block grows to 64 and a second opens), sequence 4 crosses several
    // blocks at once, sequence 5 receives nothing in the second append.
    const std::vector<std::vector<int64_t>> appends = {
        {1, 40, 64, 30, 10, 70}, {0, 23, 0, 35, 200, 0}, {0, 0, 0, 0, 90, 60}};
    const KvCacheLayout layout = make_cache_layout(hk, d, capacity);
    Int8KvCache cpu8 = make_int8_cache(layout);
    Fp16KvCache cpu16 = make_fp16_cache(layout);
    GpuKvCaches gpu(layout);
    for (size_t step = 0; step < appends.size(); ++step) {
      INFO("append " << step);
      const std::vector<int64_t>& counts = appends[step];
      int64_t total = 0;
      for (int64_t n : counts) total += n;
      // Fresh FP16 tokens; the K of sequence 2 is all zero (scale 0, codes 0) in the first append.
      const AttentionShape s = make_decode_shape(hk, hk, d, {total}, {1}).attention_shape();
      AttentionInputs in = seeded_inputs(s, 100 + step + d, step == 1 ? InputKind::llm_like : InputKind::gaussian);
      if (step == 0) {
        const int64_t first = counts[0] + counts[1];
        std::memset(&in.k[static_cast<size_t>(first) * hk * d], 0, counts[2] * hk * d * sizeof(uint16_t));
      }
      append_tokens(cpu8, counts, in.k, in.v);
      append_tokens(cpu16, counts, in.k, in.v);
      const gpu::DeviceBuffer k_new = gpu::to_device(in.k), v_new = gpu::to_device(in.v);
      gpu.append(GpuAppend(gpu, counts, k_new.data(), v_new.data()));
      const Int8KvCache got8 = gpu.download_int8();
      const Fp16KvCache got16 = gpu.download_fp16();
      CHECK(gpu.layout().length == cpu8.layout.length);
      CHECK(got8.k8 == cpu8.k8);
      CHECK(got8.v8 == cpu8.v8);
      CHECK(same_bits(got8.k_scale, cpu8.k_scale));
      CHECK(same_bits(got8.v_scale, cpu8.v_scale));
      CHECK(got16.k == cpu16.k);
      CHECK(got16.v == cpu16.v);
    }
  }
}

TEST_CASE("kv_append rejects an append past the capacity", "[gpu][decode]") {
  GpuKvCaches gpu(make_cache_layout(1, 64, {64}));
  const gpu::DeviceBuffer k_new(65 * 64 * sizeof(uint16_t)), v_new(65 * 64 * sizeof(uint16_t));
  CHECK_THROWS_AS(GpuAppend(gpu, {65}, k_new.data(), v_new.data()), std::invalid_argument);
}

TEST_CASE("decode over the INT8 and FP16 caches matches the emulator", "[gpu][decode]") {
  struct Route {
    LayoutKind layout;
    double ratio;
  };
  const std::vector<Route> routes = {
      {LayoutKind::zero, 0.0}, {LayoutKind::one, 1.0}, {LayoutKind::band, 0.5}, {LayoutKind::sptrans, 0.5}};
  for (const Problem& pr : kProblems) {
    SECTION(pr.name) {
      const DecodeShape shape = make_decode_shape(pr.hq, pr.hk, pr.d, pr.cache_len, pr.new_tokens);
      // The device's plan, single-tile splits (many partial states per row), uneven splits,
      // 2-tile splits with the longest sequence kept whole (one split of all its tiles), and
      // cuts balanced by route (balanced_by_route, built per route below).
      const std::vector<DecodeSplitPlan> split_plans = {device_split_plan(shape), fixed_decode_split_plan(shape, 1),
                                                        fixed_decode_split_plan(shape, 3), longest_whole(shape, 2)};
      for (const Route& route : routes) {
        const PreparedDecode pd = prepare(shape, route.layout, route.ratio, pr.input, 17);
        for (size_t sp = 0; sp <= split_plans.size(); ++sp) {
          // Every route with the device's plan; each forced plan on one route keeps it short.
          static constexpr LayoutKind kForcedPlanRoute[] = {LayoutKind::sptrans, LayoutKind::one, LayoutKind::zero,
                                                            LayoutKind::band};
          if (sp > 0 && route.layout != kForcedPlanRoute[sp - 1]) continue;
          const DecodeSplitPlan splits = sp < split_plans.size() ? split_plans[sp] : balanced_by_route(shape, pd.plan);
          if (sp == split_plans.size()) {
            // The band's FP16 tail moved some cut off the 3-tile grid.
            const std::vector<int32_t> firsts = splits.first_tiles(shape);
            REQUIRE(std::any_of(firsts.begin(), firsts.end(), [](int32_t f) { return f % 3 != 0; }));
          }
          INFO("layout=" << to_string(route.layout) << " coverage=" << pd.plan.coverage.groups()
                         << " tiles_per_split=" << splits.tiles_per_split
                         << " splits=" << splits.total_splits());
          DecodeGpu gpu(pd, launch_of(shape, CacheKind::int8, splits));
          if (route.layout == LayoutKind::zero) CHECK(gpu.routes() == DecodeRoutes::all_fp16);
          if (route.layout == LayoutKind::one) CHECK(gpu.routes() == DecodeRoutes::all_int8);
          const DecodeResult expected = emulate_decode_int8(shape, pd.q, pd.int8, pd.plan, splits);
          // Both mainloops where the wgmma one applies (d = 128, at most 64 rows per CTA).
          std::vector<DecodeMainloop> mainloops = {DecodeMainloop::mma_sync};
          const int rows = gpu.launch_plan().cta_rows;
          if (gpu::decode_wgmma_applies(CacheKind::int8, pr.d, rows)) mainloops.push_back(DecodeMainloop::wgmma);
          for (DecodeMainloop mainloop : mainloops) {
            // Both ways for the combine to wait (the automatic choice depends on the grid's waves).
            for (DecodeCombineWait wait : {DecodeCombineWait::grid, DecodeCombineWait::sequence}) {
              gpu.set_launch_plan(launch_of(shape, CacheKind::int8, splits, mainloop, wait));
              const Agreement a = agreement(gpu.run(), expected);
              INFO("mainloop " << to_string(mainloop) << ", combine waits for " << to_string(wait) << ": "
                               << a.describe());
              CHECK(tight(a));
              // The combine set its per-sequence counts back for the next call.
              const std::vector<unsigned> counts = gpu.arrival_counts();
              CHECK(std::all_of(counts.begin(), counts.end(), [](unsigned c) { return c == 0u; }));
            }
            if (mainloop == DecodeMainloop::wgmma && gpu.routes() != DecodeRoutes::mixed) {
              // The wgmma instance that holds both routes, on words of one kind.
              const DecodeRoutes claimed = gpu.routes();
              gpu.set_routes(DecodeRoutes::mixed);
              const Agreement m = agreement(gpu.run(), expected);
              INFO("wgmma instance for mixed routes: " << m.describe());
              CHECK(tight(m));
              gpu.set_routes(claimed);
            }
          }
          if (route.layout == LayoutKind::zero) {
            gpu.set_launch_plan(launch_of(shape, CacheKind::fp16, splits));
            const Agreement f = agreement(gpu.run(), emulate_decode_fp16(shape, pd.q, pd.fp16, splits));
            INFO("fp16 cache: " << f.describe());
            CHECK(tight(f));
          }
        }
      }
    }
  }
}

TEST_CASE("decode combines the splits of calls with many rows", "[gpu][decode]") {
  // 16 sequences x 16 new tokens x 32 query heads = 8,192 rows: more than 6 combine CTAs of 4 rows
  // per multiprocessor hold at once on a GPU of up to 341 multiprocessors, so the combine's dense
  // instance runs. 3-tile splits (at most 5 per sequence) take its one-round path, 1-tile splits
  // (up to 13) its two-round path.
  const std::vector<int64_t> lengths = {800, 65, 513, 64, 777, 300, 128, 500, 16, 640, 200, 799, 64, 450, 129, 700};
  const DecodeShape shape = make_decode_shape(32, 8, 128, lengths, std::vector<int64_t>(lengths.size(), 16));
  REQUIRE(shape.total_new() * shape.hq > 341 * 6 * 4);
  const PreparedDecode pd = prepare(shape, LayoutKind::sptrans, 0.5, InputKind::gaussian, 23);
  for (int tiles_per_split : {3, 1}) {
    const DecodeSplitPlan splits = fixed_decode_split_plan(shape, tiles_per_split);
    DecodeGpu gpu(pd, launch_of(shape, CacheKind::int8, splits));
    const DecodeResult expected = emulate_decode_int8(shape, pd.q, pd.int8, pd.plan, splits);
    const DecodeResult expected16 = emulate_decode_fp16(shape, pd.q, pd.fp16, splits);
    for (DecodeCombineWait wait : {DecodeCombineWait::grid, DecodeCombineWait::sequence}) {
      gpu.set_launch_plan(launch_of(shape, CacheKind::int8, splits, DecodeMainloop::automatic, wait));
      const Agreement a = agreement(gpu.run(), expected);
      INFO("tiles_per_split " << tiles_per_split << ", combine waits for " << to_string(wait) << ": " << a.describe());
      CHECK(tight(a));
      gpu.set_launch_plan(launch_of(shape, CacheKind::fp16, splits, DecodeMainloop::automatic, wait));
      const Agreement f = agreement(gpu.run(), expected16);
      INFO("fp16 cache: " << f.describe());
      CHECK(tight(f));
      const std::vector<unsigned> counts = gpu.arrival_counts();
      CHECK(std::all_of(counts.begin(), counts.end(), [](unsigned c) { return c == 0u; }));
    }
  }
}

TEST_CASE("decode timelines hold one row per CTA of the call", "[gpu][decode]") {
  // Sequences of n (just the new tokens), 300 and 2000 cache tokens, n = 16 new tokens (the wgmma
  // kernel) and 4 (mma.sync), band routing: every CTA's row names its split, its tiles and its
  // FP16-routed tiles as the plan and the words have them, with start <= loop start <= loop end <= end.
  const int sms = gpu::device_info(0).sm_count;
  for (int64_t n : {16, 4}) {
    const std::vector<int64_t> lengths = {n, 300, 2000};
    const DecodeShape shape = make_decode_shape(32, 8, 128, lengths, std::vector<int64_t>(lengths.size(), n));
    const PreparedDecode pd = prepare(shape, LayoutKind::band, 0.5, InputKind::gaussian, 29);
    const DecodeSplitPlan splits = fixed_decode_split_plan(shape, 7);
    DecodeGpu gpu(pd, launch_of(shape, CacheKind::int8, splits));
    for (CacheKind kind : {CacheKind::int8, CacheKind::fp16}) {
      INFO("new tokens " << n << ", " << to_string(kind) << " cache");
      gpu.set_launch_plan(launch_of(shape, kind, splits));
      const auto rows = gpu.timeline([&] { gpu.launch(); });
      // The grid is the launch plan's.
      REQUIRE(static_cast<int64_t>(rows.size()) == gpu.launch_plan().ctas);
      REQUIRE(static_cast<int64_t>(rows.size()) == splits.total_splits() * shape.hk);
      int64_t position = 0;
      for (int b = 0; b < shape.batch(); ++b) {
        for (int s = 0; s < splits.splits(b); ++s) {
          const auto [first, last] = splits.tile_range(b, s, decode_key_tiles(shape.cache_len[b]));
          for (int h = 0; h < shape.hk; ++h, ++position) {
            const auto& r = rows[static_cast<size_t>(position)];
            INFO("sequence " << b << " split " << s << " KV head " << h);
            CHECK(r[gpu::kTimelineSm] < static_cast<uint64_t>(sms));
            CHECK(r[gpu::kTimelineStart] > 0);
            CHECK(r[gpu::kTimelineStart] <= r[gpu::kTimelineLoopStart]);
            CHECK(r[gpu::kTimelineLoopStart] <= r[gpu::kTimelineLoopEnd]);
            CHECK(r[gpu::kTimelineLoopEnd] <= r[gpu::kTimelineEnd]);
            CHECK(r[gpu::kTimelineSequence] == static_cast<uint64_t>(b));
            CHECK(r[gpu::kTimelineSplit] == static_cast<uint64_t>(s));
            CHECK(r[gpu::kTimelineKvHead] == static_cast<uint64_t>(h));
            CHECK(r[gpu::kTimelineTiles] == static_cast<uint64_t>(last - first));
            int64_t fp16 = 0;
            for (int64_t t = first; t < last; ++t) {
              fp16 += kind == CacheKind::fp16 || !pd.plan.int8_route(h, b, 0, static_cast<int>(t)) ? 1 : 0;
            }
            CHECK(r[gpu::kTimelineFp16Tiles] == static_cast<uint64_t>(fp16));
          }
        }
      }
    }
    // The calls without a timeline still match the emulator.
    gpu.set_launch_plan(launch_of(shape, CacheKind::int8, splits));
    CHECK(tight(agreement(gpu.run(), emulate_decode_int8(shape, pd.q, pd.int8, pd.plan, splits))));
  }
}

TEST_CASE("decode keeps zero scales finite next to illegal keys", "[gpu][decode]") {
  // A block of all-zero K has scale 0 and codes 0, so every score of its tile has x = 0 and row
  // factor f = 0 on both score paths; a head whose queries are all zero has Q8 scale 0 and f = 0
  // on the INT8 path for every tile. Both sit in the last, partly filled tile of their sequence,
  // where the illegal keys' x = -inf meets f: -inf * 0 would be NaN.
  const DecodeShape shape = make_decode_shape(8, 2, 128, {130, 65}, {16, 4});
  for (LayoutKind layout : {LayoutKind::one, LayoutKind::zero}) {
    PreparedDecode pd = prepare(shape, layout, layout == LayoutKind::one ? 1.0 : 0.0, InputKind::gaussian, 23);
    const KvCacheLayout& cl = pd.int8.layout;
    const int hk = shape.hk, d = shape.d;
    // Sequence 0, KV head 0: its third block (tokens 128 and 129) all zero.
    for (int64_t token = 128; token < 130; ++token) {
      const size_t row = (static_cast<size_t>(cl.cu_capacity[0] + token) * hk + 0) * d;
      std::fill_n(pd.int8.k8.begin() + row, d, int8_t{0});
      std::fill_n(pd.fp16.k.begin() + row, d, uint16_t{0});
    }
    pd.int8.k_scale[static_cast<size_t>(cl.cu_blocks[0] + 2) * hk + 0] = 0.0f;
    // Sequence 1 (new tokens 16..19 of the batch), query head 5: all zero.
    for (int64_t token = 16; token < 20; ++token) {
      std::fill_n(pd.q.begin() + (static_cast<size_t>(token) * shape.hq + 5) * d, d, uint16_t{0});
    }
    const DecodeSplitPlan splits = device_split_plan(shape);
    DecodeGpu gpu(pd, launch_of(shape, CacheKind::int8, splits));
    const DecodeResult expected = emulate_decode_int8(shape, pd.q, pd.int8, pd.plan, splits);
    for (DecodeMainloop mainloop : {DecodeMainloop::mma_sync, DecodeMainloop::wgmma}) {
      gpu.set_launch_plan(launch_of(shape, CacheKind::int8, splits, mainloop));
      const Agreement a = agreement(gpu.run(), expected);
      INFO("layout " << to_string(layout) << ", mainloop " << to_string(mainloop) << ": " << a.describe());
      CHECK(tight(a));
    }
    gpu.set_launch_plan(launch_of(shape, CacheKind::fp16, splits));
    const Agreement f = agreement(gpu.run(), emulate_decode_fp16(shape, pd.q, pd.fp16, splits));
    INFO("fp16 cache: " << f.describe());
    CHECK(tight(f));
  }
}

TEST_CASE("decode keeps FP16 P finite at the largest V under the lazy reference", "[gpu][decode]") {
  // V at +-65504 (INT8: codes +-127, block scale 65504 / 127), Q = e_0 for every row with softmax
  // scale 1, and key 64 scoring `jump` (log2 units) above key 0, the first tile's maximum: just below
  // kDecodeRescaleLog2 the reference stays and tile 2's p * v_scale reaches 2^jump * 515.8, just
  // above it the reference moves (reference/decode_emulator.hpp). Both mainloops, both caches.
  const DecodeShape shape = make_decode_shape(4, 1, 128, {128}, {16}, 1.0f);
  const int d = shape.d;
  const float log2e = 1.44269504088896340736f;
  for (float jump : {kDecodeRescaleLog2 - 0.25f, kDecodeRescaleLog2 + 1.5f}) {
    std::vector<uint16_t> k(128 * d, 0), v(128 * d, 0);
    k[0] = float_to_half(2.0f);
    k[64 * d] = float_to_half(2.0f + jump / log2e);
    for (int t = 0; t < 128; ++t) {
      for (int c = 0; c < d; ++c) v[t * d + c] = float_to_half((t + c) % 3 == 0 ? -65504.0f : 65504.0f);
    }
    for (LayoutKind layout : {LayoutKind::one, LayoutKind::zero}) {
      const PreparedDecode pd = unit_query_problem(shape, layout, k, v);
      const DecodeSplitPlan splits = fixed_decode_split_plan(shape, 2);
      DecodeGpu gpu(pd, launch_of(shape, CacheKind::int8, splits));
      const DecodeResult expected = emulate_decode_int8(shape, pd.q, pd.int8, pd.plan, splits);
      for (DecodeMainloop mainloop : {DecodeMainloop::mma_sync, DecodeMainloop::wgmma}) {
        gpu.set_launch_plan(launch_of(shape, CacheKind::int8, splits, mainloop));
        const Agreement a = agreement(gpu.run(), expected);
        INFO("jump " << jump << ", layout " << to_string(layout) << ", mainloop " << to_string(mainloop) << ": "
                     << a.describe());
        CHECK(a.dev.nonfinite == 0);
        CHECK(tight(a));
      }
      gpu.set_launch_plan(launch_of(shape, CacheKind::fp16, splits));
      const Agreement f = agreement(gpu.run(), emulate_decode_fp16(shape, pd.q, pd.fp16, splits));
      INFO("jump " << jump << ", fp16 cache: " << f.describe());
      CHECK(f.dev.nonfinite == 0);
      CHECK(tight(f));
    }
  }
}

TEST_CASE("decode: under the lazy reference a key far below a later maximum keeps its FP16 P", "[gpu][decode]") {
  // The inputs of the emulator test of the same name at d = 128 and 16 new tokens with GQA 4 (64
  // rows: both mainloops): Q = e_0 for every row, softmax scale 1, keys scoring 0 but key 64 (5.9
  // log2 units, within kDecodeRescaleLog2 of tile 1's maximum) and key 65 (-16.4), V only at key
  // 65. o[0] of a row is p_65 * 127 / l over its visible keys: 2^-16.4 in FP16 under the lazy
  // reference, 7% off if a kernel measured p against the exact maximum.
  const DecodeShape shape = make_decode_shape(4, 1, 128, {128}, {16}, 1.0f);
  const int d = shape.d;
  std::vector<uint16_t> k(128 * d, 0), v(128 * d, 0);
  const float log2e = 1.44269504088896340736f;
  k[64 * d] = float_to_half(5.9f / log2e);
  k[65 * d] = float_to_half(-16.4f / log2e);
  v[65 * d] = float_to_half(127.0f);
  // New token i sees keys 0 .. 112 + i (causal, bottom-right).
  const auto exact_o0 = [&](int token) {
    const int visible = 113 + token;
    double m = -1e30, l = 0.0;
    for (int t = 0; t < visible; ++t) m = std::max(m, static_cast<double>(half_to_float(k[t * d])));
    for (int t = 0; t < visible; ++t) l += std::exp(static_cast<double>(half_to_float(k[t * d])) - m);
    return std::exp(static_cast<double>(half_to_float(k[65 * d])) - m) * 127.0 / l;
  };
  const double expected = exact_o0(0);
  const auto o0_within = [&](const DecodeOutput& got) {
    int far = 0;
    for (size_t row = 0; row < got.o.size() / d; ++row) {  // rows [token, query head]
      const double want = exact_o0(static_cast<int>(row / shape.hq));
      far += !(std::fabs(half_to_float(got.o[row * d]) - want) < 0.02 * want);
    }
    return far;
  };
  for (LayoutKind layout : {LayoutKind::zero, LayoutKind::one}) {
    const PreparedDecode pd = unit_query_problem(shape, layout, k, v);
    const DecodeSplitPlan splits = fixed_decode_split_plan(shape, 2);
    DecodeGpu gpu(pd, launch_of(shape, CacheKind::int8, splits));
    for (DecodeMainloop mainloop : {DecodeMainloop::mma_sync, DecodeMainloop::wgmma}) {
      gpu.set_launch_plan(launch_of(shape, CacheKind::int8, splits, mainloop));
      const DecodeOutput got = gpu.run();
      INFO("layout " << to_string(layout) << ", mainloop " << to_string(mainloop) << ": o[0] of row 0 "
                     << half_to_float(got.o[0]) << ", exact " << expected);
      CHECK(o0_within(got) == 0);
    }
    gpu.set_launch_plan(launch_of(shape, CacheKind::fp16, splits));
    const DecodeOutput got16 = gpu.run();
    INFO("fp16 cache: o[0] of row 0 " << half_to_float(got16.o[0]) << ", exact " << expected);
    CHECK(o0_within(got16) == 0);
  }
}

TEST_CASE("decode honours every routing bit", "[gpu][decode]") {
  // One 64-token tile per sequence, all INT8; flipping the bit of one (KV head, sequence) moves
  // that tile to the FP16 score path, which changes every output of its rows by far more than
  // the tight tolerance.
  const DecodeShape shape = make_decode_shape(4, 1, 128, {64}, {4});
  const PreparedDecode pd = prepare(shape, LayoutKind::one, 1.0, InputKind::gaussian, 5);
  const DecodeSplitPlan splits = device_split_plan(shape);
  const DecodeResult original = emulate_decode_int8(shape, pd.q, pd.int8, pd.plan, splits);
  RoutingPlan flipped = pd.plan;
  std::vector<uint64_t> words = flipped.words;
  REQUIRE(words.size() == 1);
  words[0] ^= 1ull;
  set_explicit_words(flipped, words, "flipped word");

  DecodeGpu gpu(pd, launch_of(shape, CacheKind::int8, splits));
  gpu.set_routing(flipped, flipped.words);
  const DecodeOutput got = gpu.run();
  const Agreement against_original = agreement(got, original);
  INFO("vs the unflipped emulator: " << against_original.describe());
  CHECK_FALSE(tight(against_original));
  const Agreement against_flipped = agreement(got, emulate_decode_int8(shape, pd.q, pd.int8, flipped, splits));
  INFO("vs the flipped emulator: " << against_flipped.describe());
  CHECK(tight(against_flipped));
}

TEST_CASE("decode rejects unsupported values by name", "[gpu][decode]") {
  gpu::DecodeParams p;
  p.batch = 1;
  p.hq = p.hk = 1;
  p.d = 96;
  p.max_new_tokens = 1;
  try {
    gpu::decode_fp16(p, nullptr);
    FAIL("d=96 accepted");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("unsupported head dimension d=96") != std::string::npos);
  }
  p.d = 128;
  p.max_new_tokens = 17;
  try {
    gpu::decode_int8(p, nullptr);
    FAIL("max_new_tokens=17 accepted");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("unsupported max_new_tokens=17") != std::string::npos);
  }
}
