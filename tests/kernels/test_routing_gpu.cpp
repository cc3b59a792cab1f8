// Layout adaptive: the GPU's words (gpu::adaptive_words) against the CPU builder's, bit for bit,
// with every intermediate step, on fresh random inputs (the seeds are printed on a failure):
// varlen with empty and length-1 sequences, causal with Lq != Lk both ways, GQA, groups of
// several key tiles, d 64 and 128; ties between equal scores; misaligned pointers refused.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "apps/common/gpu_problem.hpp"
#include "core/routing/layouts/adaptive.hpp"
#include "tests/kernels/gpu_checks.hpp"
#include "tests/reference/attention_fixtures.hpp"
#include "tilemix/routing.hpp"

using namespace tilemix;
using namespace tilemix::app;
using namespace tilemix::testing;

namespace {

struct Problem {
  const char* name;
  int hq, hk, d;
  bool causal;
  std::vector<int64_t> lq, lk;
  std::optional<int> group;
};

const std::vector<Problem> kProblems = {
    {"causal square d128 GQA4", 8, 2, 128, true, {1000}, {1000}, std::nullopt},
    {"non-causal varlen d64 GQA3", 6, 2, 64, false, {77, 300}, {300, 77}, std::nullopt},
    {"causal varlen with length-1 and empty d128 MQA", 8, 1, 128, true, {300, 1, 0, 129}, {300, 1, 0, 129},
     std::nullopt},
    {"causal Lq > Lk (rows with no key) d64", 2, 1, 64, true, {300}, {77}, std::nullopt},
    {"causal Lq < Lk d128, groups of 3 key tiles", 3, 3, 128, true, {77}, {1000}, 3},
    {"causal 5k, groups of 2 key tiles d64", 4, 2, 64, true, {5000}, {5000}, 2},
};

// The adaptive plan of `pr` at `ratio` for the routed kernel's geometry.
RoutingPlan adaptive_plan(const Problem& pr, const AttentionShape& s, const AttentionInputs& in, double ratio) {
  RoutingRequest request;
  request.layout = LayoutKind::adaptive;
  request.ratio = ratio;
  request.group = pr.group;
  request.geometry = gpu::tilemix_geometry(pr.d);
  return make_plan(s, request, in);
}

}  // namespace

TEST_CASE("the GPU builds adaptive's words bit for bit as the CPU does", "[gpu][routing]") {
  std::random_device entropy;
  for (const Problem& pr : kProblems) {
    for (InputKind kind : {InputKind::gaussian, InputKind::llm_like}) {
      for (double ratio : {0.0, 0.3, 0.5, 1.0}) {
        const uint64_t seed = (static_cast<uint64_t>(entropy()) << 32) | entropy();
        INFO(pr.name << " input " << to_string(kind) << " seed " << seed << " ratio " << ratio);
        const AttentionShape s = make_shape(pr.hq, pr.hk, pr.d, pr.causal, pr.lq, pr.lk);
        const AttentionInputs in = seeded_inputs(s, seed, kind);
        const RoutingPlan plan = adaptive_plan(pr, s, in, ratio);

        const layouts::AdaptiveSchedule schedule = layouts::adaptive_schedule(plan.tilings, plan.tile_offset, ratio);
        const layouts::AdaptivePools pools = layouts::pool_inputs(s, schedule, in.q, in.k);
        const std::vector<float> scores = layouts::group_scores(s, schedule, pools);
        GpuProblem gpu(s, in);
        const AdaptiveOutput got = gpu.adaptive_routing(plan);
        CHECK(same_bits(got.qbar, pools.qbar));
        CHECK(same_bits(got.qmax, pools.qmax));
        CHECK(same_bits(got.kbar, pools.kbar));
        CHECK(same_bits(got.kmax, pools.kmax));
        CHECK(same_bits(got.scores, scores));
        CHECK(got.words == plan.words);
      }
    }
  }
}

TEST_CASE("the GPU selects among equal scores by position as the CPU does", "[gpu][routing]") {
  // Constant Q and K give every group of a row the same logit, so the scores tie in runs and
  // the selection is decided by the keys' position bits (the radix select's last digits).
  for (const Problem& pr : kProblems) {
    INFO(pr.name);
    const AttentionShape s = make_shape(pr.hq, pr.hk, pr.d, pr.causal, pr.lq, pr.lk);
    AttentionInputs in = seeded_inputs(s, 1, InputKind::gaussian);
    std::fill(in.q.begin(), in.q.end(), uint16_t{0x3c00});  // 1.0
    std::fill(in.k.begin(), in.k.end(), uint16_t{0x3800});  // 0.5
    for (double ratio : {0.3, 0.5}) {
      const RoutingPlan plan = adaptive_plan(pr, s, in, ratio);
      GpuProblem gpu(s, in);
      CHECK(gpu.adaptive_routing(plan).words == plan.words);
    }
  }
}

TEST_CASE("adaptive_words rejects q, k or kbar off 16 bytes before any launch", "[gpu][routing]") {
  // The checks run before any pointer is read, so stand-in addresses suffice.
  alignas(16) static float slot[64];
  const auto at = [](size_t offset) { return reinterpret_cast<float*>(reinterpret_cast<char*>(slot) + offset); };
  gpu::AdaptiveRoutingParams p;
  p.batch = 1;
  p.hq = p.hk = 1;
  p.d = 128;
  p.block_m = 128;
  p.total_tiles = p.total_groups = 1;
  p.q = p.k = at(0);
  p.cu_seqlens_q = p.cu_seqlens_k = p.tile_offset = p.group_offset = p.mask_width = p.fp16_groups =
      reinterpret_cast<const int64_t*>(at(0));
  p.tile_sequence = p.tile_groups = reinterpret_cast<const int*>(at(0));
  p.cells = p.qbar = p.qmax = p.kbar = p.kmax = p.scores = at(0);
  p.words = reinterpret_cast<uint64_t*>(at(0));
  for (int which = 0; which < 3; ++which) {
    gpu::AdaptiveRoutingParams bad = p;
    if (which == 0) bad.q = at(2);
    if (which == 1) bad.k = at(8);
    if (which == 2) bad.kbar = at(4);
    CHECK_THROWS_WITH(gpu::adaptive_words(bad, nullptr), Catch::Contains("16-byte aligned"));
  }
}
