#pragma once
// The cuts of a split-K decode call over the KV cache, as plain data: which key tiles each split of
// each sequence covers. The decode kernel and the emulator run the same cuts, so they combine the
// same partial states. They are chosen with the rest of a launch by plan_decode_launch
// (kernels/decode/plan.hpp), beside the kernels, because the choice counts waves of the CTAs that
// the kernels' compile-time configurations keep resident; the emulator needs only the cuts, so
// they live here and reference/ includes nothing from kernels/.
#include <cstdint>
#include <utility>
#include <vector>

#include "core/decode/decode_shape.hpp"

namespace tilemix {

// The key tiles of sequence b (ceil(L_b / 64)) are cut into contiguous chunks of `tiles_per_split`
// tiles; chunk s covers tiles [s * tiles_per_split, ...). A sequence with a single split takes all
// its tiles, however many: a plan may keep some sequences whole and cut the others
// (make_decode_split_plan does where whole sequences fill the first waves). A plan may also place
// its cuts explicitly (`first_tile`, balance_decode_splits), so that splits of unequal tile counts
// cost the same.
struct DecodeSplitPlan {
  int tiles_per_split = 1;
  std::vector<int64_t> split_offset;  // B+1 prefix sums of the split count per sequence
  // Empty, or [total_splits]: the first key tile of each split within its sequence (0 for every
  // sequence's first split, increasing, below the sequence's tile count).
  std::vector<int64_t> first_tile;
  int64_t total_splits() const { return split_offset.back(); }
  int splits(int b) const { return static_cast<int>(split_offset[b + 1] - split_offset[b]); }
  // Whether some sequence has more than one split, so that partial states are combined.
  bool has_cuts() const { return total_splits() > static_cast<int64_t>(split_offset.size()) - 1; }
  // Key tiles [first, last) of split s of sequence b, which has `tiles` key tiles.
  std::pair<int64_t, int64_t> tile_range(int b, int s, int64_t tiles) const;
  // Whether every sequence of `shape` has one split or ceil(tiles / tiles_per_split), or, with
  // explicit cuts, splits that partition its tiles into non-empty ranges.
  bool fits(const DecodeShape& shape) const;
  // The first key tile of every split (the kernels' form of the plan), [total_splits].
  std::vector<int32_t> first_tiles(const DecodeShape& shape) const;
};

}  // namespace tilemix
