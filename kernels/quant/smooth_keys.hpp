#pragma once
// The smoothing pass's part of the routed kernel's call (smooth_keys.cu), for dispatch.cu.
#include <string>

#include "tilemix/attention.hpp"

namespace tilemix::gpu {

// smooth_k: lse += fp32(qkbar * softmax_scale) on every row with keys, on `stream` after the
// attention kernel (no lse: nothing). `context` names the call in errors.
void add_query_key_means_to_lse(const PrefillParams& p, void* stream, const std::string& context);

}  // namespace tilemix::gpu
