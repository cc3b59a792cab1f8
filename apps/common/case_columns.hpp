#pragma once
// The columns that describe a bench row's case, shared by the CPU and GPU tables:
// case method layout ratio coverage coverage_tiles coverage_cells params batch hq hk d lq lk
// causal mode state accum.
#include <string>
#include <vector>

#include "core/config/experiment.hpp"
#include "core/report/table.hpp"
#include "core/routing/plan.hpp"

namespace tilemix::app {

std::vector<Column> case_columns();

// The cells of case_columns(). `routed` false leaves the routing and mode cells empty (the
// baselines have no routing).
std::vector<Cell> case_cells(const CaseSpec& spec, const RoutingPlan& plan, const std::string& method, bool routed);

// The length of every sequence when they are equal, -1 for a varlen batch (the config holds it).
int64_t common_length(const std::vector<int64_t>& cu_seqlens);

}  // namespace tilemix::app
