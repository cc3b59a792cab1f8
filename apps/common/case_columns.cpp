#include "apps/common/case_columns.hpp"

namespace tilemix::app {

std::vector<Column> case_columns() {
  return {{"case", "case"},
          {"method", "method"},
          {"layout", "layout"},
          {"ratio", "ratio", 3},
          {"coverage", "cov.groups", 3},
          {"coverage_tiles", "cov.tiles", 3},
          {"coverage_cells", "cov.cells", 3},
          {"params", "params"},
          {"batch", "B"},
          {"hq", "Hq"},
          {"hk", "Hk"},
          {"d", "d"},
          {"lq", "Lq"},
          {"lk", "Lk"},
          {"causal", "causal"},
          {"mode", "mode"},
          {"state", "state"},
          {"accum", "accum"}};
}

int64_t common_length(const std::vector<int64_t>& cu) {
  const int64_t first = cu[1] - cu[0];
  for (size_t b = 1; b + 1 < cu.size(); ++b) {
    if (cu[b + 1] - cu[b] != first) return -1;
  }
  return first;
}

std::vector<Cell> case_cells(const CaseSpec& spec, const RoutingPlan& plan, const std::string& method, bool routed) {
  const auto& s = spec.shape;
  std::string params;
  for (const auto& tpl : plan.templates) params += (params.empty() ? "" : "; ") + tpl.params.to_string();
  const Coverage& cov = plan.coverage;
  const auto when_routed = [&](Cell c) { return routed ? c : Cell{}; };
  return {spec.name,
          method,
          when_routed(std::string(to_string(spec.routing.layout))),
          when_routed(spec.routing.ratio),
          when_routed(cov.groups()),
          when_routed(cov.tiles()),
          when_routed(cov.cells()),
          when_routed(params),
          int64_t{s.batch()},
          int64_t{s.hq},
          int64_t{s.hk},
          int64_t{s.d},
          common_length(s.cu_seqlens_q),
          common_length(s.cu_seqlens_k),
          s.causal,
          when_routed(std::string(to_string(spec.numerics.mode))),
          std::string(to_string(spec.numerics.state)),
          std::string(to_string(spec.numerics.accum))};
}

}  // namespace tilemix::app
