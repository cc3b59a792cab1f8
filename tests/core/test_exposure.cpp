#include <catch2/catch.hpp>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/metrics.hpp"
#include "tests/reference/attention_fixtures.hpp"

using namespace tilemix;
using namespace tilemix::testing;

TEST_CASE("heavy-hitter exposure of a hand-checkable row", "[exposure]") {
  // One query, 128 keys in two key tiles of 64 (g = 1), softmax scale 1, q = e_0, so the score of
  // key j is k_j[0]: key 70 scores 4, keys 0..63 score 0, the other keys of tile 1 score -2.
  const AttentionShape s = make_shape(1, 1, 64, false, {1}, {128}, 1.0f);
  AttentionInputs in;
  in.q.assign(64, float_to_half(0.0f));
  in.q[0] = float_to_half(1.0f);
  in.k.assign(128 * 64, float_to_half(0.0f));
  in.v.assign(128 * 64, float_to_half(1.0f));
  for (int j = 64; j < 128; ++j) in.k[j * 64] = float_to_half(-2.0f);
  in.k[70 * 64] = float_to_half(4.0f);

  // Tile 1 on INT8, tile 0 on FP16.
  const RoutingPlan plan = masked_plan(uniform_plan(s, TileGeometry{128, 64}, true), [](int, int, int) { return 0b10ull; });
  REQUIRE(plan.tilings[0].g == 1);
  REQUIRE(plan.words == std::vector<uint64_t>{0b10});

  const double z = std::exp(4.0) + 64.0 + 63.0 * std::exp(-2.0);
  const double p_heavy = std::exp(4.0) / z, p_tile0 = 1.0 / z, p_tile1 = std::exp(-2.0) / z;
  REQUIRE(p_heavy > 0.3);
  // tau = 0.5 adds the fewest tile-0 keys (the next heaviest) that bring the mass to 0.5.
  int extra = 0;
  while (p_heavy + extra * p_tile0 < 0.5) ++extra;
  CHECK(extra == 9);

  const HeavyHitterExposure e = heavy_hitter_exposure(s, in, plan, {0.05, 0.3, 0.5, 1.0});
  REQUIRE(e.exposure.size() == 4);
  CHECK(e.tau == std::vector<double>{0.05, 0.3, 0.5, 1.0});
  CHECK(e.exposure[0] == Approx(1.0));  // only key 70, on INT8
  CHECK(e.exposure[1] == Approx(1.0));
  CHECK(e.exposure[2] == Approx(p_heavy / (p_heavy + extra * p_tile0)).epsilon(1e-12));
  CHECK(e.exposure[3] == Approx(p_heavy + 63 * p_tile1).epsilon(1e-12));  // all keys: the INT8 share of P
}

TEST_CASE("heavy-hitter exposure is 0 for the zero layout and 1 for the one layout", "[exposure]") {
  const AttentionShape s = make_shape(6, 2, 64, true, {200, 1, 0, 90}, {260, 1, 0, 90});
  const AttentionInputs in = seeded_inputs(s, 17);
  const std::vector<double> taus = {0.05, 0.1, 0.2, 0.3};
  const HeavyHitterExposure zero = heavy_hitter_exposure(s, in, uniform_plan(s, TileGeometry{128, 64}, false), taus);
  const HeavyHitterExposure one = heavy_hitter_exposure(s, in, uniform_plan(s, TileGeometry{64, 64}, true), taus);
  for (size_t t = 0; t < taus.size(); ++t) {
    CHECK(zero.exposure[t] == 0.0);
    CHECK(one.exposure[t] == Approx(1.0));
  }
}

TEST_CASE("heavy-hitter exposure follows the routed share of the heavy keys", "[exposure]") {
  // Causal square sequence with every group of the diagonal band on FP16 and the rest on INT8:
  // a query's heavy keys sit anywhere, so the exposure lies strictly between 0 and 1.
  const AttentionShape s = make_shape(2, 1, 64, true, {512}, {512});
  const AttentionInputs in = seeded_inputs(s, 5);
  const RoutingPlan one = uniform_plan(s, TileGeometry{128, 64}, true);
  const RoutingPlan plan = masked_plan(one, [&one](int, int b, int m) {
    return ~(1ull << (one.tilings[b].legal_group_end(m) - 1));
  });
  const HeavyHitterExposure e = heavy_hitter_exposure(s, in, plan, {0.1, 0.3});
  for (double x : e.exposure) {
    CHECK(x > 0.0);
    CHECK(x < 1.0);
  }
}

TEST_CASE("heavy-hitter exposure rejects tau outside (0, 1]", "[exposure]") {
  const AttentionShape s = make_shape(1, 1, 64, false, {4}, {4});
  const AttentionInputs in = seeded_inputs(s, 3);
  const RoutingPlan plan = uniform_plan(s, TileGeometry{128, 64}, true);
  CHECK_THROWS_AS(heavy_hitter_exposure(s, in, plan, {0.0}), std::invalid_argument);
  CHECK_THROWS_AS(heavy_hitter_exposure(s, in, plan, {1.5}), std::invalid_argument);
}
