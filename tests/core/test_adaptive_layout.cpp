// Layout adaptive (core/routing/layouts/adaptive.hpp): its coverage at awkward shapes, its
// determinism, that groups carrying the attention mass stay FP16, and its shared FP32 steps.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/fp16.hpp"
#include "core/inputs/inputs.hpp"
#include "core/problem.hpp"
#include "core/routing/coverage.hpp"
#include "core/routing/layouts/adaptive.hpp"
#include "core/routing/layouts/adaptive_math.hpp"
#include "core/routing/plan.hpp"
#include "core/routing/render.hpp"

using namespace tilemix;

namespace {

struct Problem {
  const char* name;
  int hq, hk;
  bool causal;
  std::vector<int64_t> lq, lk;
  std::optional<int> group;
};

// Varlen with empty and length-1 sequences, Lq != Lk both ways, GQA and MQA, groups of several
// key tiles (given and automatic).
const std::vector<Problem> kProblems = {
    {"causal varlen with length-1 and empty, MQA", 4, 1, true, {300, 1, 0, 129}, {300, 1, 0, 129}, std::nullopt},
    {"causal Lq > Lk (rows with no key)", 2, 1, true, {300}, {77}, std::nullopt},
    {"causal Lq < Lk", 2, 2, true, {77}, {1000}, std::nullopt},
    {"non-causal varlen GQA3", 6, 2, false, {77, 300}, {300, 77}, std::nullopt},
    {"causal, groups of 3 key tiles", 4, 2, true, {700, 450}, {1000, 450}, 3},
    {"causal 8k, automatic groups of 2 key tiles", 2, 1, true, {8192}, {8192}, std::nullopt},
};

AttentionShape shape_of(const Problem& p) {
  AttentionShape s;
  s.hq = p.hq;
  s.hk = p.hk;
  s.d = 64;
  s.causal = p.causal;
  s.cu_seqlens_q = prefix_sums(p.lq);
  s.cu_seqlens_k = prefix_sums(p.lk);
  validate(s);
  return s;
}

AttentionInputs inputs_of(const AttentionShape& s, uint64_t seed, InputKind kind = InputKind::llm_like) {
  InputSpec spec;
  spec.kind = kind;
  spec.seed = seed;
  return make_inputs(s, spec);
}

RoutingRequest adaptive(double ratio, std::optional<int> group = std::nullopt) {
  RoutingRequest r;
  r.layout = LayoutKind::adaptive;
  r.ratio = ratio;
  r.group = group;
  return r;
}

int64_t round_half_up(double x) { return static_cast<int64_t>(std::floor(x + 0.5)); }

}  // namespace

TEST_CASE("adaptive keeps the FP16 groups the ratio asks for, per sequence and overall", "[routing]") {
  for (const Problem& p : kProblems) {
    const AttentionShape s = shape_of(p);
    const AttentionInputs in = inputs_of(s, 5);
    for (double ratio : {0.0, 0.1, 0.25, 0.5, 0.75, 1.0}) {
      INFO(p.name << " ratio " << ratio);
      const RoutingPlan plan = make_plan(s, adaptive(ratio, p.group), in);
      int64_t legal = 0, legal_before = 0;
      for (const SequenceTiling& t : plan.tilings) {
        for (int m = 0; m < t.tm; ++m) legal += t.legal_group_end(m);
      }
      Coverage measured;
      for (int b = 0; b < s.batch(); ++b) {
        const SequenceTiling& t = plan.tilings[b];
        int64_t sequence_legal = 0;
        for (int m = 0; m < t.tm; ++m) sequence_legal += t.legal_group_end(m);
        // The FP16 groups of the sequences so far are round((1 - ratio) * their legal groups).
        const int64_t want = round_half_up((1.0 - ratio) * static_cast<double>(legal_before + sequence_legal)) -
                             round_half_up((1.0 - ratio) * static_cast<double>(legal_before));
        legal_before += sequence_legal;
        CHECK(std::fabs(static_cast<double>(want) - (1.0 - ratio) * static_cast<double>(sequence_legal)) < 1.0);
        for (int h = 0; h < s.hk; ++h) {
          std::vector<uint64_t> words(t.tm);
          int64_t fp16 = 0;
          int rows_with_keys = 0, sinks_fp16 = 0;
          for (int m = 0; m < t.tm; ++m) {
            words[m] = plan.word(h, b, m);
            const uint64_t legal_mask = legal_group_mask(t, m);
            REQUIRE((words[m] & ~legal_mask) == 0);
            fp16 += __builtin_popcountll(legal_mask & ~words[m]);
            if (t.legal_group_end(m) > 0) {
              ++rows_with_keys;
              sinks_fp16 += (words[m] & 1ull) == 0;
            }
          }
          CHECK(fp16 == want);
          // Each row's sink group comes first (the earlier rows' when there are fewer FP16 groups).
          CHECK(sinks_fp16 == std::min<int64_t>(want, rows_with_keys));
          measured += measure_coverage(t, words);
        }
      }
      CHECK(measured.int8_groups == plan.coverage.int8_groups);
      CHECK(measured.int8_cells == plan.coverage.int8_cells);
      CHECK(plan.coverage.int8_groups == s.hk * (legal - round_half_up((1.0 - ratio) * static_cast<double>(legal))));
      // The closest coverage the legal groups allow.
      CHECK(std::fabs(plan.coverage.groups() - ratio) <= 0.5 / static_cast<double>(legal) + 1e-12);
    }
  }
}

TEST_CASE("adaptive rounds the FP16 groups over the sequences so far, not sequence by sequence", "[routing]") {
  // Three sequences of one query tile and three key groups each: at 50% each would round 1.5 up.
  std::vector<SequenceTiling> tilings;
  for (int b = 0; b < 3; ++b) tilings.push_back(make_tiling(100, 192, false, TileGeometry{128, 64}, std::nullopt));
  const layouts::AdaptiveSchedule schedule = layouts::adaptive_schedule(tilings, {0, 1, 2, 3}, 0.5);
  CHECK(schedule.fp16_groups == std::vector<int64_t>{2, 1, 2});
  CHECK(schedule.tile_groups == std::vector<int>{3, 3, 3});
  CHECK(schedule.group_offset == std::vector<int64_t>{0, 3, 6, 9});
  CHECK(schedule.cells[0] == 100.0f * 64.0f);
  CHECK(schedule.cells[3] == 0.0f);

  // Causal cells: the group on the diagonal holds only the pairs below it.
  const SequenceTiling t = make_tiling(128, 128, true, TileGeometry{128, 64}, std::nullopt);
  const layouts::AdaptiveSchedule causal = layouts::adaptive_schedule({t}, {0, 1}, 0.5);
  CHECK(causal.cells[0] == static_cast<float>(t.legal_cells(0, 0, 64)));
  CHECK(causal.cells[1] == static_cast<float>(t.legal_cells(0, 64, 128)));
  CHECK(causal.cells[0] + causal.cells[1] == 128.0f * 129.0f / 2.0f);
}

TEST_CASE("adaptive words are deterministic and depend on the data", "[routing]") {
  const Problem& p = kProblems[0];
  const AttentionShape s = shape_of(p);
  const AttentionInputs in = inputs_of(s, 17);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const RoutingPlan one_thread = make_plan(s, adaptive(0.5), in);
  omp_set_num_threads(std::max(2, threads));
  const RoutingPlan many_threads = make_plan(s, adaptive(0.5), in);
  omp_set_num_threads(threads);
  CHECK(one_thread.words == many_threads.words);
  CHECK(make_plan(s, adaptive(0.5), in).words == one_thread.words);
  // Other inputs of the same shape route otherwise.
  CHECK(make_plan(s, adaptive(0.5), inputs_of(s, 18)).words != one_thread.words);
}

TEST_CASE("adaptive keeps FP16 the key groups that carry the attention mass", "[routing]") {
  // Every query points along channel 0; the keys of three groups do too, the others are noise:
  // those groups hold most of every row's attention.
  for (bool causal : {false, true}) {
    INFO((causal ? "causal" : "non-causal"));
    AttentionShape s;
    s.hq = 4;
    s.hk = 2;
    s.d = 64;
    s.causal = causal;
    s.cu_seqlens_q = {0, 2048};
    s.cu_seqlens_k = {0, 2048};
    validate(s);
    AttentionInputs in = inputs_of(s, 3, InputKind::gaussian);
    const std::vector<int> heavy = {3, 11, 20};
    for (int64_t i = 0; i < s.total_q(); ++i) {
      for (int h = 0; h < s.hq; ++h) {
        uint16_t* row = &in.q[(static_cast<size_t>(i) * s.hq + h) * s.d];
        for (int c = 0; c < s.d; ++c) row[c] = float_to_half((c == 0 ? 4.0f : 0.0f) + 0.1f * half_to_float(row[c]));
      }
    }
    for (const int j : heavy) {
      for (int64_t key = j * 64; key < (j + 1) * 64; ++key) {
        for (int h = 0; h < s.hk; ++h) {
          uint16_t* row = &in.k[(static_cast<size_t>(key) * s.hk + h) * s.d];
          row[0] = float_to_half(8.0f + half_to_float(row[0]));
        }
      }
    }
    for (double ratio : {0.5, 0.75}) {
      INFO("ratio " << ratio);
      const RoutingPlan plan = make_plan(s, adaptive(ratio), in);
      const SequenceTiling& t = plan.tilings[0];
      for (int h = 0; h < s.hk; ++h) {
        for (int m = 0; m < t.tm; ++m) {
          for (const int j : heavy) {
            if (j < t.legal_group_end(m)) CHECK(((plan.word(h, 0, m) >> j) & 1ull) == 0);
          }
        }
      }
      CHECK(std::fabs(plan.coverage.groups() - ratio) < 0.01);
    }
  }
}

TEST_CASE("adaptive needs the inputs and names its criterion", "[routing]") {
  const AttentionShape s = shape_of(kProblems[3]);
  CHECK_THROWS_AS(make_plan(s, adaptive(0.5)), std::invalid_argument);
  AttentionInputs short_inputs = inputs_of(s, 1);
  short_inputs.k.pop_back();
  CHECK_THROWS_AS(make_plan(s, adaptive(0.5), short_inputs), std::invalid_argument);
  CHECK(routes_from_data(LayoutKind::adaptive));
  CHECK_FALSE(routes_from_data(LayoutKind::band));
  CHECK_THROWS_AS(search_layout(make_tiling(100, 100, true, {}, std::nullopt), LayoutKind::adaptive, 0.5, 0),
                  std::logic_error);

  const RoutingPlan plan = make_plan(s, adaptive(0.5), inputs_of(s, 1));
  CHECK(layouts::adaptive_params().to_string() == "score=share*absmax select=sequence sinks=1");
  for (const RouteTemplate& tpl : plan.templates) CHECK(tpl.params.to_string() == layouts::adaptive_params().to_string());
  const nlohmann::json j = plan_json(plan);
  CHECK(j["params"]["score"] == "share*absmax");
  CHECK(j["params"]["sinks"] == 1);
  CHECK(plan_summary(plan).find("params    score=share*absmax select=sequence sinks=1") != std::string::npos);
  // The templates hold KV head 0's words of the first sequence of each geometry.
  for (size_t b = 0; b < plan.tilings.size(); ++b) {
    const RouteTemplate& tpl = plan.templates[plan.seq_template[b]];
    for (int m = 0; m < plan.tilings[b].tm && plan.seq_template[b] == static_cast<int>(b); ++m) {
      CHECK(tpl.words[m] == plan.word(0, static_cast<int>(b), m));
    }
  }
}

TEST_CASE("adaptive's exp2 and order keys are exact where they must be", "[routing]") {
  using layouts::adaptive_exp2;
  using layouts::adaptive_order_key;
  CHECK(adaptive_exp2(0.0f) == 1.0f);
  CHECK(adaptive_exp2(-3.0f) == 0.125f);
  CHECK(adaptive_exp2(-126.0f) == std::ldexp(1.0f, -126));
  CHECK(adaptive_exp2(-1000.0f) == std::ldexp(1.0f, -126));
  CHECK(adaptive_exp2(std::numeric_limits<float>::quiet_NaN()) == std::ldexp(1.0f, -126));
  CHECK(adaptive_exp2(5.0f) == 1.0f);
  double worst = 0.0;
  for (float t = -126.0f; t <= 0.0f; t += 0.0137f) {
    worst = std::max(worst, std::fabs(adaptive_exp2(t) / std::exp2(static_cast<double>(t)) - 1.0));
  }
  CHECK(worst < 2e-6);

  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> ascending = {-inf, -2.5f, -1e-40f, 0.0f, 1e-40f, 1e-3f, 0.5f, 7.0f, inf};
  for (size_t i = 0; i + 1 < ascending.size(); ++i) {
    CHECK(adaptive_order_key(ascending[i]) < adaptive_order_key(ascending[i + 1]));
  }
  CHECK(adaptive_order_key(std::numeric_limits<float>::quiet_NaN()) < adaptive_order_key(-inf));
  // Equal scores: the lower position wins.
  CHECK(layouts::adaptive_selection_key(5, 0, 3) > layouts::adaptive_selection_key(5, 0, 4));
  CHECK(layouts::adaptive_selection_key(5, 1, 0) < layouts::adaptive_selection_key(5, 0, 63));
}
