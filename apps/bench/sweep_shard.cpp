#include "apps/bench/sweep_shard.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <regex>

#include "apps/bench/case_groups.hpp"
#include "core/error.hpp"
#include "core/problem.hpp"

namespace tilemix::app {

ShardSpec parse_shard(const std::string& text) {
  static const std::regex form("([0-9]{1,9})/([0-9]{1,9})");
  std::smatch m;
  if (std::regex_match(text, m, form)) {
    const ShardSpec shard{std::stoi(m[1]), std::stoi(m[2])};
    if (shard.index >= 1 && shard.index <= shard.count) return shard;
  }
  throw InputError("--shard", "expected K/N with 1 <= K <= N (numbered from 1: 1/2 and 2/2 are the two halves of "
                              "a sweep), got '" + text + "'");
}

std::string to_string(const ShardSpec& shard) {
  return std::to_string(shard.index) + "/" + std::to_string(shard.count);
}

double case_work(const CaseSpec& spec) {
  return attention_ops(spec.shape) * (spec.model ? spec.model->layers : 1);
}

std::vector<int> deal_by_work(const std::vector<double>& work, int count) {
  std::vector<size_t> heaviest_first(work.size());
  std::iota(heaviest_first.begin(), heaviest_first.end(), size_t{0});
  std::stable_sort(heaviest_first.begin(), heaviest_first.end(),
                   [&](size_t a, size_t b) { return work[a] > work[b]; });
  std::vector<double> load(static_cast<size_t>(count), 0.0);
  std::vector<int> owner(work.size(), 0);
  for (const size_t item : heaviest_first) {
    const auto lightest = std::min_element(load.begin(), load.end());  // the first of equal loads
    owner[item] = static_cast<int>(lightest - load.begin());
    *lightest += work[item];
  }
  return owner;
}

SweepShard select_shard(const ExperimentConfig& config, const ShardSpec& shard, RowOrder order) {
  const std::vector<CaseGroup> groups = group_cases(config, group_key);
  std::map<const CaseSpec*, size_t> group_of;
  std::vector<double> work(groups.size(), 0.0);
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const CaseSpec* spec : groups[g]) {
      group_of[spec] = g;
      work[g] += case_work(*spec);
    }
  }
  const std::vector<int> owner = deal_by_work(work, shard.count);
  const auto mine = [&](const CaseSpec* spec) { return owner[group_of.at(spec)] == shard.index - 1; };

  // Each case's position among the cases as the unsharded run writes their rows.
  std::vector<const CaseSpec*> row_order;
  if (order == RowOrder::by_group) {
    for (const CaseGroup& group : groups) row_order.insert(row_order.end(), group.begin(), group.end());
  } else {
    for (const CaseSpec& spec : config.cases) row_order.push_back(&spec);
  }
  nlohmann::json positions = nlohmann::json::object();
  for (size_t i = 0; i < row_order.size(); ++i) {
    if (mine(row_order[i])) positions[row_order[i]->name] = i;
  }

  SweepShard out{config, {}};
  out.config.cases.clear();
  for (const CaseSpec& spec : config.cases) {
    if (mine(&spec)) out.config.cases.push_back(spec);
  }
  nlohmann::json own_groups = nlohmann::json::array();
  double own_work = 0.0;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (owner[g] != shard.index - 1) continue;
    own_groups.push_back(g);
    own_work += work[g];
  }
  out.provenance = {{"spec", to_string(shard)},
                    {"index", shard.index},
                    {"count", shard.count},
                    {"group_count", groups.size()},
                    {"groups", own_groups},
                    {"case_count", config.cases.size()},
                    {"cases", positions},
                    {"row_order", order == RowOrder::by_group ? "by_group" : "by_case"},
                    {"work", own_work},
                    {"total_work", std::accumulate(work.begin(), work.end(), 0.0)},
                    {"complete", false}};
  return out;
}

}  // namespace tilemix::app
