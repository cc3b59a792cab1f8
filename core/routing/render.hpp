#pragma once
// Text and JSON views of a routing plan, for `tilemix-bench plan`.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/routing/plan.hpp"

namespace tilemix {

// ASCII map: one line per query tile (top = tile 0), one character per key group (left = group 0):
// '8' INT8, 'F' FP16, '.' no legal pair in the group.
std::string render_map(const SequenceTiling& t, const std::vector<uint64_t>& words);
std::string render_map(const RouteTemplate& tpl);

// The `plan --json` object of sequence 0 (KV head 0's words): keys lq lk causal block_m block_n
// group tmask tm layout ratio params coverage{groups,tiles,cells} words (hex, one per query tile).
// Coverage counts every KV head of sequence 0.
nlohmann::json plan_json(const RoutingPlan& plan);

// Every KV head's words, [[hex per query tile] per KV head]: the "words" of a words file.
nlohmann::json words_json(const RoutingPlan& plan);

// Short text summary of sequence 0: geometry, g, Tmask, Tm, chosen parameters, the three coverages.
std::string plan_summary(const RoutingPlan& plan);

}  // namespace tilemix
