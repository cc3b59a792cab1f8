#include "core/decode/split_plan.hpp"

#include <algorithm>

namespace tilemix {

std::pair<int64_t, int64_t> DecodeSplitPlan::tile_range(int b, int s, int64_t tiles) const {
  if (splits(b) == 1) return {0, tiles};
  if (!first_tile.empty()) {
    const int64_t g = split_offset[b] + s;
    return {first_tile[g], s + 1 < splits(b) ? first_tile[g + 1] : tiles};
  }
  const int64_t first = static_cast<int64_t>(s) * tiles_per_split;
  return {first, std::min(tiles, first + tiles_per_split)};
}

bool DecodeSplitPlan::fits(const DecodeShape& shape) const {
  if (tiles_per_split < 1 || split_offset.size() != shape.cache_len.size() + 1 || split_offset[0] != 0) return false;
  if (!first_tile.empty() && static_cast<int64_t>(first_tile.size()) != total_splits()) return false;
  for (int b = 0; b < shape.batch(); ++b) {
    const int64_t tiles = decode_key_tiles(shape.cache_len[b]);
    if (splits(b) < 1) return false;
    if (first_tile.empty()) {
      if (splits(b) != 1 && splits(b) != (tiles + tiles_per_split - 1) / tiles_per_split) return false;
      continue;
    }
    if (splits(b) > std::max<int64_t>(1, tiles) || first_tile[split_offset[b]] != 0) return false;
    for (int s = 1; s < splits(b); ++s) {
      const int64_t first = first_tile[split_offset[b] + s];
      if (first <= first_tile[split_offset[b] + s - 1] || first >= tiles) return false;
    }
  }
  return true;
}

std::vector<int32_t> DecodeSplitPlan::first_tiles(const DecodeShape& shape) const {
  std::vector<int32_t> firsts;
  firsts.reserve(static_cast<size_t>(total_splits()));
  for (int b = 0; b < shape.batch(); ++b) {
    const int64_t tiles = decode_key_tiles(shape.cache_len[b]);
    for (int s = 0; s < splits(b); ++s) firsts.push_back(static_cast<int32_t>(tile_range(b, s, tiles).first));
  }
  return firsts;
}

}  // namespace tilemix
