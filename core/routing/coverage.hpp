#pragma once
// The three coverage measures of SPEC 4, counted over legal groups, executed compute tiles and
// legal score cells.
#include <cstdint>
#include <vector>

#include "core/tiling.hpp"

namespace tilemix {

struct Coverage {
  int64_t int8_groups = 0, legal_groups = 0;
  int64_t int8_tiles = 0, legal_tiles = 0;
  int64_t int8_cells = 0, legal_cells = 0;

  static double ratio(int64_t a, int64_t b) { return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b); }
  double groups() const { return ratio(int8_groups, legal_groups); }  // the paper's rho-hat
  double tiles() const { return ratio(int8_tiles, legal_tiles); }
  double cells() const { return ratio(int8_cells, legal_cells); }
  Coverage& operator+=(const Coverage& o);
};

// Coverage of one sequence's words (one per query tile). Bits of illegal groups do not count.
Coverage measure_coverage(const SequenceTiling& t, const std::vector<uint64_t>& words);

// Mask with one bit per legal group of query tile m.
inline uint64_t legal_group_mask(const SequenceTiling& t, int m) {
  const int n = t.legal_group_end(m);
  return n >= 64 ? ~0ull : ((1ull << n) - 1ull);
}

}  // namespace tilemix
