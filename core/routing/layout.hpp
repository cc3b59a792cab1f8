#pragma once
// Routing layouts (SPEC 4). A static layout maps a tiling and a parameter set to one routing word
// per query tile (bit j = 1: group j on the INT8 path). Each owns a deterministic parameter grid;
// search_layout() picks the grid point whose realized group coverage is closest to the requested
// ratio (first point wins ties, and grids are ordered from small to large parameters). `adaptive`
// routes from Q and K instead (core/routing/layouts/adaptive.hpp), and `file` reads its words.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/enum_names.hpp"
#include "core/routing/coverage.hpp"
#include "core/tiling.hpp"

namespace tilemix {

enum class LayoutKind { zero, one, band, global, rowrand, align_sparse, bigbird, sptrans, adaptive, file };
// Every layout, `file` last.
inline constexpr EnumName<LayoutKind> kLayoutNames[] = {
    {LayoutKind::zero, "zero"},       {LayoutKind::one, "one"},         {LayoutKind::band, "band"},
    {LayoutKind::global, "global"},   {LayoutKind::rowrand, "rowrand"}, {LayoutKind::align_sparse, "align_sparse"},
    {LayoutKind::bigbird, "bigbird"}, {LayoutKind::sptrans, "sptrans"}, {LayoutKind::adaptive, "adaptive"},
    {LayoutKind::file, "file"}};
inline const char* to_string(LayoutKind k) { return enum_name(kLayoutNames, k); }

std::vector<LayoutKind> generated_layouts();  // every static layout, built from a template (not `adaptive`, `file`)

// Named parameter values in a fixed order, printed and saved with results; `choices` name what a
// layout decided that is not a number (adaptive's criterion), printed first.
struct LayoutParams {
  LayoutParams() = default;
  LayoutParams(std::vector<std::pair<std::string, double>> v,
               std::vector<std::pair<std::string, std::string>> c = {})
      : values(std::move(v)), choices(std::move(c)) {}
  std::vector<std::pair<std::string, double>> values;
  std::vector<std::pair<std::string, std::string>> choices;
  double get(const std::string& name) const;
  std::string to_string() const;  // "w=3 G=1", "score=share*absmax select=sequence sinks=1"
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

// Builds the words of static `layout` with explicit parameters (no search).
std::vector<uint64_t> layout_words(const SequenceTiling& t, LayoutKind layout, const LayoutParams& params,
                                   uint64_t seed);

// Searches the static layout's parameter grid for `ratio` and returns the best template.
RouteTemplate search_layout(const SequenceTiling& t, LayoutKind layout, double ratio, uint64_t seed);

// One-line description per layout, for --list and the README.
const char* layout_description(LayoutKind k);

}  // namespace tilemix
