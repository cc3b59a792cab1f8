#include "core/routing/coverage.hpp"

#include <algorithm>
#include <stdexcept>

#include "core/problem.hpp"

namespace tilemix {

Coverage& Coverage::operator+=(const Coverage& o) {
  int8_groups += o.int8_groups;
  legal_groups += o.legal_groups;
  int8_tiles += o.int8_tiles;
  legal_tiles += o.legal_tiles;
  int8_cells += o.int8_cells;
  legal_cells += o.legal_cells;
  return *this;
}

Coverage measure_coverage(const SequenceTiling& t, const std::vector<uint64_t>& words) {
  if (words.size() != static_cast<size_t>(t.tm)) {
    throw std::invalid_argument("measure_coverage: " + std::to_string(words.size()) + " words for " +
                                std::to_string(t.tm) + " query tiles");
  }
  Coverage c;
  for (int m = 0; m < t.tm; ++m) {
    const int groups = t.legal_group_end(m);
    const int tiles = t.legal_tile_end(m);
    const int64_t rows = t.row_end(m) - t.row_begin(m);
    // Keys every row of the tile sees: groups ending there are full, so only the few groups
    // around the diagonal need the row-by-row count.
    const int64_t seen_by_all = visible_keys(t.row_begin(m), t.lq, t.lk, t.causal);
    const uint64_t word = words[m];
    c.legal_groups += groups;
    c.legal_tiles += tiles;
    for (int j = 0; j < groups; ++j) {
      const int64_t kb = t.group_begin(j), ke = t.group_end(j);
      const int64_t cells = ke <= seen_by_all ? rows * (ke - kb) : t.legal_cells(m, kb, ke);
      const int64_t group_tiles = std::min<int64_t>(static_cast<int64_t>(j + 1) * t.g, tiles) -
                                  static_cast<int64_t>(j) * t.g;
      c.legal_cells += cells;
      if ((word >> j) & 1ull) {
        c.int8_groups += 1;
        c.int8_tiles += group_tiles;
        c.int8_cells += cells;
      }
    }
  }
  return c;
}

}  // namespace tilemix
