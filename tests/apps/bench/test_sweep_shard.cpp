// tilemix-bench --shard K/N (apps/bench/sweep_shard.hpp): the slices of a sweep are whole groups
// of cases that share inputs, deterministic, disjoint, complete and balanced by work.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/bench/case_groups.hpp"
#include "apps/bench/sweep_shard.hpp"
#include "core/config/experiment.hpp"
#include "core/error.hpp"

using namespace tilemix;
using namespace tilemix::app;

namespace {

// 4 lengths x 2 head counts (8 groups of unequal work) x 3 layouts; the axes interleave the
// groups in the config's order, so the group order and the config order differ.
ExperimentConfig sweep_config() {
  const nlohmann::json j = {
      {"name", "shard-test"},
      {"defaults", {{"batch", 1}, {"hk", 1}, {"d", 64}, {"causal", true}, {"ratio", 0.5}}},
      {"cases", {{{"name", "zero"}, {"layout", "zero"}}, {{"name", "band"}, {"layout", "band"}},
                 {{"name", "sptrans"}, {"layout", "sptrans"}}}},
      {"axes", {{"seq_len", {128, 256, 512, 1024}}, {"hq", {1, 2}}}}};
  return parse_config(j, "shard-test.json");
}

std::vector<std::string> names(const ExperimentConfig& config) {
  std::vector<std::string> out;
  for (const CaseSpec& spec : config.cases) out.push_back(spec.name);
  return out;
}

}  // namespace

TEST_CASE("--shard reads K/N, numbered from 1, and refuses anything else naming the flag", "[shard]") {
  const ShardSpec one = parse_shard("1/1");
  CHECK(one.index == 1);
  CHECK(one.count == 1);
  const ShardSpec s = parse_shard("3/8");
  CHECK(s.index == 3);
  CHECK(s.count == 8);
  CHECK(to_string(s) == "3/8");
  for (const char* bad : {"0/2", "3/2", "1/0", "0/0", "", "2", "1/2/3", "a/b", " 1/2", "1/2 ", "-1/2", "1/-2", "+1/2",
                          "1/", "/2", "1.0/2", "99999999999/99999999999"}) {
    INFO("'" << bad << "'");
    try {
      parse_shard(bad);
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(e.where() == "--shard");
      CHECK(std::string(e.what()).find(std::string("'") + bad + "'") != std::string::npos);
    }
  }
}

TEST_CASE("deal_by_work deals the heaviest first to the lightest shard", "[shard]") {
  // 5 -> shard 0, 4 -> 1, the first 3 -> 1 (4 < 5), the next -> 0 (5 < 7), the last -> 1 (7 < 8).
  CHECK(deal_by_work({5, 4, 3, 3, 3}, 2) == std::vector<int>{0, 1, 1, 0, 1});
  CHECK(deal_by_work({1, 1, 1, 1}, 4) == std::vector<int>{0, 1, 2, 3});
  CHECK(deal_by_work({2, 7}, 3) == std::vector<int>{1, 0});  // shard 2 stays empty
  CHECK(deal_by_work({}, 2).empty());

  std::vector<double> work;
  for (int i = 0; i < 50; ++i) work.push_back(1.0 + (i * 37 % 23) * (i % 3 == 0 ? 10.0 : 1.0));
  const double heaviest = *std::max_element(work.begin(), work.end());
  const double total = std::accumulate(work.begin(), work.end(), 0.0);
  for (int n = 1; n <= 7; ++n) {
    INFO("N = " << n);
    const std::vector<int> owner = deal_by_work(work, n);
    CHECK(owner == deal_by_work(work, n));
    std::vector<double> load(static_cast<size_t>(n), 0.0);
    for (size_t i = 0; i < work.size(); ++i) {
      REQUIRE(owner[i] >= 0);
      REQUIRE(owner[i] < n);
      load[static_cast<size_t>(owner[i])] += work[i];
    }
    CHECK(*std::max_element(load.begin(), load.end()) <= total / n + heaviest);
  }
}

TEST_CASE("the slices of a sweep are whole groups: deterministic, disjoint, complete, balanced", "[shard]") {
  const ExperimentConfig config = sweep_config();
  REQUIRE(config.cases.size() == 24);
  const std::vector<CaseGroup> groups = group_cases(config, group_key);
  REQUIRE(groups.size() == 8);
  std::vector<double> group_work;
  for (const CaseGroup& g : groups) {
    double w = 0.0;
    for (const CaseSpec* spec : g) w += case_work(*spec);
    group_work.push_back(w);
  }
  const double heaviest = *std::max_element(group_work.begin(), group_work.end());
  const double total = std::accumulate(group_work.begin(), group_work.end(), 0.0);

  for (const RowOrder order : {RowOrder::by_group, RowOrder::by_case}) {
    for (int n = 1; n <= 10; ++n) {
      INFO("N = " << n << (order == RowOrder::by_group ? " by group" : " by case"));
      std::map<std::string, int> shard_of_case;
      std::map<std::string, int> shard_of_group;
      std::set<int64_t> positions;
      double largest = 0.0;
      for (int k = 1; k <= n; ++k) {
        const SweepShard shard = select_shard(config, {k, n}, order);
        const SweepShard again = select_shard(config, {k, n}, order);
        CHECK(names(shard.config) == names(again.config));
        CHECK(shard.provenance == again.provenance);

        // The slice keeps the config's order and everything but the other cases.
        std::vector<std::string> expected;
        for (const std::string& name : names(config)) {
          if (shard.provenance.at("cases").contains(name)) expected.push_back(name);
        }
        CHECK(names(shard.config) == expected);
        CHECK(shard.config.name == config.name);
        CHECK(shard.config.json == config.json);

        const nlohmann::json& p = shard.provenance;
        CHECK(p.at("spec") == std::to_string(k) + "/" + std::to_string(n));
        CHECK(p.at("index") == k);
        CHECK(p.at("count") == n);
        CHECK(p.at("group_count") == groups.size());
        CHECK(p.at("case_count") == config.cases.size());
        CHECK(p.at("complete") == false);
        CHECK(p.at("cases").size() == shard.config.cases.size());
        for (const CaseSpec& spec : shard.config.cases) {
          CHECK(shard_of_case.emplace(spec.name, k).second);  // disjoint
          const auto [it, fresh] = shard_of_group.emplace(group_key(spec), k);
          CHECK(it->second == k);  // a group is never split
          CHECK(positions.insert(p.at("cases").at(spec.name).get<int64_t>()).second);
        }
        double work = 0.0;
        for (const CaseSpec& spec : shard.config.cases) work += case_work(spec);
        CHECK(p.at("work").get<double>() == Approx(work));
        CHECK(p.at("total_work").get<double>() == Approx(total));
        largest = std::max(largest, work);
        std::set<std::string> own_groups;
        for (const CaseSpec& spec : shard.config.cases) own_groups.insert(group_key(spec));
        CHECK(p.at("groups").size() == own_groups.size());
      }
      CHECK(shard_of_case.size() == config.cases.size());  // complete
      CHECK(shard_of_group.size() == groups.size());
      CHECK(positions.size() == config.cases.size());
      CHECK(*positions.rbegin() == static_cast<int64_t>(config.cases.size()) - 1);
      CHECK(largest <= total / n + heaviest);
    }
  }
}

TEST_CASE("a case's position is where the unsharded run writes its rows", "[shard]") {
  const ExperimentConfig config = sweep_config();
  const std::vector<CaseGroup> groups = group_cases(config, group_key);
  std::vector<std::string> by_group;
  for (const CaseGroup& g : groups) {
    for (const CaseSpec* spec : g) by_group.push_back(spec->name);
  }
  const std::vector<std::string> by_case = names(config);
  REQUIRE(by_group != by_case);
  for (const auto& [order, expected] : {std::pair{RowOrder::by_group, by_group}, std::pair{RowOrder::by_case, by_case}}) {
    std::vector<std::string> placed(config.cases.size());
    for (int k = 1; k <= 3; ++k) {
      const SweepShard shard = select_shard(config, {k, 3}, order);
      for (const auto& item : shard.provenance.at("cases").items()) {
        placed.at(item.value().get<size_t>()) = item.key();
      }
    }
    CHECK(placed == expected);
  }
}

TEST_CASE("more shards than groups leaves the extra shards empty", "[shard]") {
  const ExperimentConfig config = sweep_config();
  int empty = 0;
  size_t cases = 0;
  for (int k = 1; k <= 12; ++k) {
    const SweepShard shard = select_shard(config, {k, 12}, RowOrder::by_group);
    cases += shard.config.cases.size();
    if (shard.config.cases.empty()) {
      ++empty;
      CHECK(shard.provenance.at("work") == 0.0);
    }
  }
  CHECK(empty == 4);
  CHECK(cases == config.cases.size());
}

TEST_CASE("a model case's work counts its layers", "[shard]") {
  const nlohmann::json j = {
      {"name", "model-work"},
      {"defaults", {{"kind", "model"}, {"batch", 1}, {"seq_len", 128}, {"hq", 2}, {"hk", 1}, {"d", 64}, {"vocab", 16}}},
      {"cases", {{{"name", "one-layer"}, {"layers", 1}}, {{"name", "three-layers"}, {"layers", 3}}}}};
  const ExperimentConfig config = parse_config(j, "model-work.json");
  REQUIRE(config.cases.size() == 2);
  CHECK(case_work(config.cases[0]) > 0.0);
  CHECK(case_work(config.cases[1]) == Approx(3.0 * case_work(config.cases[0])));
}
