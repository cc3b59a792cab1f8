#pragma once
// Which cases of a sweep share inputs: the groups every tilemix-bench sweep runs together (inputs
// made and uploaded once, baselines timed once per group), and the unit that --shard deals out.
#include <functional>
#include <string>
#include <vector>

#include "core/config/experiment.hpp"

namespace tilemix::app {

using CaseGroup = std::vector<const CaseSpec*>;

// Cases with equal `key` form one group (groups and cases in first-appearance order), so a group's
// inputs are generated and uploaded once.
std::vector<CaseGroup> group_cases(const ExperimentConfig& config,
                                   const std::function<std::string(const CaseSpec&)>& key);

// Prefill: what the inputs, flash_fp16 and the baselines depend on: the shape (every sequence
// length), the numerics, the mainloop and the input spec.
std::string prefill_group_key(const CaseSpec& spec);

// Decode: timing and cache contents do not depend on the values (Q, K and V are seeded N(0, 1)
// draws, Q on the host, K and V on the device), so the cases that share caches share the shape
// and the seed.
std::string decode_group_key(const CaseSpec& spec);

// Model: what the reference model and flash_fp16 depend on.
std::string model_group_key(const CaseSpec& spec);

// The key of the case's kind.
std::string group_key(const CaseSpec& spec);

}  // namespace tilemix::app
