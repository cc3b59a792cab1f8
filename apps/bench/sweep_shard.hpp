#pragma once
// tilemix-bench --shard K/N: the K-th of N slices of a sweep, so that a sweep too large for one
// machine runs as N jobs (scripts/slurm/) whose outputs `tilemix-bench merge` joins. A slice is
// made of whole groups of cases that share inputs (case_groups.hpp); the groups are dealt by
// estimated work, so the slices take about as long, and the same config and N always give the
// same slices.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config/experiment.hpp"

namespace tilemix::app {

// Shard `index` of `count`, numbered from 1 (a Slurm array --array=1-N gives the task ids).
struct ShardSpec {
  int index = 1;
  int count = 1;
};

// "K/N" with 1 <= K <= N; anything else is an InputError naming --shard.
ShardSpec parse_shard(const std::string& text);
std::string to_string(const ShardSpec& shard);

// The estimated work of a case: its attention operations (SPEC 8: 4 d Hq legal pairs), times the
// layers of a model case.
double case_work(const CaseSpec& spec);

// The shard (0-based) of each of `work.size()` items: heaviest first, each to the shard with the
// least work so far (ties: the earlier item first, the lower shard), so no shard exceeds the mean
// by more than the heaviest item.
std::vector<int> deal_by_work(const std::vector<double>& work, int count);

// Where an unsharded run writes the rows of its cases: the GPU and model sweeps group by group,
// the CPU emulator sweep in the config's order.
enum class RowOrder { by_group, by_case };

struct SweepShard {
  ExperimentConfig config;  // the input config with the slice's cases only, in the sweep's order
  // Recorded in the output's provenance under "shard" (docs/usage.md): the spec, the slice's
  // groups and work, and each case's position in the unsharded run's rows, which `merge` uses to
  // put the rows back in that order. "complete" is false until the run has finished.
  nlohmann::json provenance;
};

SweepShard select_shard(const ExperimentConfig& config, const ShardSpec& shard, RowOrder order);

}  // namespace tilemix::app
