#pragma once
// Host-side planning of the decode kernels (plain C++, built with and without CUDA; the emulator
// takes the same plans): how a call's query rows fall into CTAs, what the routing words hold, and
// the split-K plan over the cache with its cuts balanced by route cost.
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "core/decode/decode_case.hpp"
#include "core/decode/decode_shape.hpp"
#include "core/routing/plan.hpp"
#include "core/choices/decode.hpp"

namespace tilemix {

// CTA work: one CTA serves a (split, KV head, head chunk); its query rows are the head chunk's
// query heads x the sequence's new tokens.

// Query heads one CTA serves: all of a KV head's, unless heads x max new tokens pass
// gpu::kDecodeMaxRows rows.
int decode_heads_per_cta(int hq, int hk, int max_new_tokens);
// Query rows of a CTA: decode_heads_per_cta x max new tokens.
int decode_cta_rows(int hq, int hk, int max_new_tokens);
// CTAs per (KV head, split): ceil(hq / hk / decode_heads_per_cta).
int decode_head_chunks(int hq, int hk, int max_new_tokens);

// The routes the words [hk][batch] give the key tiles of every sequence (bit t / groups[b] of a
// word routes tile t to INT8; tiles of groups past bit 63 are FP16-routed, as on the GPU).
DecodeRoutes decode_routes(const DecodeShape& shape, const std::vector<uint64_t>& words,
                           const std::vector<int>& groups);

// Split-K over the cache: the key tiles of sequence b (ceil(L_b / 64)) are cut into contiguous
// chunks of `tiles_per_split` tiles; chunk s covers tiles [s * tiles_per_split, ...). A sequence
// with a single split takes all its tiles, however many: a plan may keep some sequences whole and
// cut the others (make_decode_split_plan does where whole sequences fill the first waves). A plan
// may also place its cuts explicitly (`first_tile`, balance_decode_splits), so that splits of
// unequal tile counts cost the same. The kernel and the emulator take the same plan, so they
// combine the same partial states.
struct DecodeSplitPlan {
  int tiles_per_split = 1;
  std::vector<int64_t> split_offset;  // B+1 prefix sums of the split count per sequence
  // Empty, or [total_splits]: the first key tile of each split within its sequence (0 for every
  // sequence's first split, increasing, below the sequence's tile count).
  std::vector<int64_t> first_tile;
  int64_t total_splits() const { return split_offset.back(); }
  int splits(int b) const { return static_cast<int>(split_offset[b + 1] - split_offset[b]); }
  // Key tiles [first, last) of split s of sequence b, which has `tiles` key tiles.
  std::pair<int64_t, int64_t> tile_range(int b, int s, int64_t tiles) const;
  // Whether every sequence of `shape` has one split or ceil(tiles / tiles_per_split), or, with
  // explicit cuts, splits that partition its tiles into non-empty ranges.
  bool fits(const DecodeShape& shape) const;
  // The first key tile of every split (the kernels' form of the plan), [total_splits].
  std::vector<int32_t> first_tiles(const DecodeShape& shape) const;
};

// Chooses tiles_per_split (at least `min_tiles_per_split`) for a GPU of `sm_count`
// multiprocessors that keep `ctas_per_sm` decode CTAs resident each: the plan with the fewest
// waves times tiles per split (plus a split's fixed cost), so that the last wave is nearly full
// and long caches at small batch still fill the GPU; where whole sequences fill a wave, possibly
// a plan that keeps the leading sequences whole and cuts only the rest. The model and the
// measurements behind it are in plan.cpp.
DecodeSplitPlan make_decode_split_plan(const DecodeShape& shape, int sm_count, int ctas_per_sm,
                                       int min_tiles_per_split = 4);
// Every sequence cut into splits of exactly `tiles_per_split` key tiles (the last one shorter).
DecodeSplitPlan fixed_decode_split_plan(const DecodeShape& shape, int tiles_per_split);

// Moves the cuts of every sequence with several splits so that its splits cost about the same:
// `tile_cost(b, t)` > 0 is the relative cost of key tile t of sequence b; cut i goes where the
// running cost is nearest i / splits of the sequence's total, each split keeping at least one
// tile. The split counts stay (1 to the sequence's tiles each). Where tiles cost alike the cuts
// are the uniform ones to within a tile. What it is for: a layout that routes the most recent
// keys to FP16 (sptrans, band) puts them all in a sequence's last splits, which the wgmma kernel
// runs 1.28x slower per tile, so the call waited for them (decode v25, docs/perf/decode.md).
void balance_decode_splits(DecodeSplitPlan& plan, const DecodeShape& shape,
                           const std::function<double(int b, int64_t tile)>& tile_cost);

// The mainloop a call of `kind` with this shape runs (`requested` resolved as the dispatcher
// resolves it; the FP16 cache always runs mma.sync).
DecodeMainloop decode_resolved_mainloop(CacheKind kind, const DecodeShape& shape,
                                        DecodeMainloop requested = DecodeMainloop::automatic);
// CTAs of that kernel one multiprocessor keeps resident: with the multiprocessor count, what
// make_decode_split_plan sizes its waves by.
int decode_resident_ctas(CacheKind kind, const DecodeShape& shape, DecodeMainloop requested = DecodeMainloop::automatic);
// The cost of an FP16-routed key tile relative to an INT8-routed one in that kernel (1 where the
// routes cost alike): the split plan balances its cuts by it.
double decode_fp16_tile_cost(CacheKind kind, const DecodeShape& shape,
                             DecodeMainloop requested = DecodeMainloop::automatic);

// The split plan of `kind`'s decode kernel on a GPU of `sm_count` multiprocessors (the INT8 and
// FP16 kernels keep different numbers of CTAs resident, so their plans differ). With `routing`
// (the INT8 cache's plan) the cuts are balanced by the kernel's route costs
// (decode_fp16_tile_cost, averaged over the KV heads). `tiles_per_split` > 0 forces that many
// key tiles per split instead, uniform (a config's tiles_per_split).
DecodeSplitPlan decode_split_plan(const DecodeShape& shape, CacheKind kind, int sm_count, int tiles_per_split = 0,
                                  DecodeMainloop mainloop = DecodeMainloop::automatic,
                                  const RoutingPlan* routing = nullptr);

}  // namespace tilemix
