#pragma once
// Per-library halves of baseline_available() and the version strings.
#include <string>

#include "core/problem.hpp"
#include "tilemix/baselines.hpp"

namespace tilemix::gpu {

bool torch_like_available(const AttentionShape& shape, std::string* why);
bool cudnn_available(Baseline b, const AttentionShape& shape, std::string* why);

}  // namespace tilemix::gpu
