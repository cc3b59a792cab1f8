#pragma once
// Routing layouts (SPEC 4). A layout maps a tiling and a parameter set to one routing word per
// query tile (bit j = 1: group j on the INT8 path). Each layout owns a deterministic parameter
// grid; search_layout() picks the grid point whose realized group coverage is closest to the
// requested ratio (first point wins ties, and grids are ordered from small to large parameters).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/routing/coverage.hpp"
#include "core/tiling.hpp"

namespace tilemix {

enum class LayoutKind { zero, one, band, global, rowrand, align_sparse, bigbird, sptrans, file };

const char* to_string(LayoutKind k);
std::optional<LayoutKind> parse_layout(const std::string& name);
std::vector<LayoutKind> all_layouts();        // every name, `file` last
std::vector<LayoutKind> generated_layouts();  // every layout built from a template (not `file`)

// Named parameter values in a fixed order, printed and saved with results.
struct LayoutParams {
  std::vector<std::pair<std::string, double>> values;
  double get(const std::string& name) const;
  std::string to_string() const;  // "w=3 G=1"
};

// One sequence geometry's routing template: what the plan caches and broadcasts.
struct RouteTemplate {
  SequenceTiling tiling;
  LayoutKind layout = LayoutKind::zero;
  double ratio = 0.0;
  uint64_t seed = 0;
  LayoutParams params;
  std::vector<uint64_t> words;  // one per query tile
  Coverage coverage;
};

// Builds the words of `layout` with explicit parameters (no search).
std::vector<uint64_t> layout_words(const SequenceTiling& t, LayoutKind layout, const LayoutParams& params,
                                   uint64_t seed);

// Searches the layout's parameter grid for `ratio` and returns the best template.
RouteTemplate search_layout(const SequenceTiling& t, LayoutKind layout, double ratio, uint64_t seed);

// One-line description per layout, for --list and the README.
const char* layout_description(LayoutKind k);

}  // namespace tilemix
