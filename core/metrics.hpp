#pragma once
// Deviation metrics and tolerances (SPEC 8), and heavy-hitter exposure (paper G.5).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/inputs/inputs.hpp"
#include "core/problem.hpp"
#include "core/routing/plan.hpp"

namespace tilemix {

struct Deviation {
  double max_abs = 0.0;
  double mean_abs = 0.0;
  double rel_l2 = 0.0;  // ||o - r|| / ||r||
  double cosine = 1.0;
  int64_t nonfinite = 0;  // NaN/Inf elements in `out`
  int64_t count = 0;
  int64_t ref_nonfinite = 0;  // NaN/Inf elements in `ref`
};

// `out` vs `ref`, element by element (same length). Pairs with a NaN/Inf on either side are
// left out of the sums and counted instead.
Deviation deviation(const std::vector<double>& out, const std::vector<double>& ref);

// Upper bounds (and a lower bound for cosine); an unset field is not checked. NaN never passes.
struct Tolerance {
  std::optional<double> max_abs, mean_abs, rel_l2, min_cosine;
  bool empty() const { return !max_abs && !mean_abs && !rel_l2 && !min_cosine; }
};

// True when `d` is within `t`; otherwise `why` says which bound failed and by how much.
bool within(const Deviation& d, const Tolerance& t, std::string* why = nullptr);

// Weighted INT8 exposure E^tau of the heavy hitters: for each query, the smallest key set whose
// cumulative importance reaches tau of the row; E = sum(I * int8) / sum(I) over those sets.
// Importance is the attention probability P (the paper weights P by dL/dP, which needs a model
// loss); computed exactly in double on the CPU.
struct HeavyHitterExposure {
  std::vector<double> tau;       // e.g. 0.05, 0.10, 0.20, 0.30
  std::vector<double> exposure;  // E^tau per tau
};
HeavyHitterExposure heavy_hitter_exposure(const AttentionShape& shape, const AttentionInputs& inputs,
                                          const RoutingPlan& plan, const std::vector<double>& taus);

// Half-bit or float buffers as double, for deviation().
std::vector<double> half_to_double(const std::vector<uint16_t>& x);

}  // namespace tilemix
