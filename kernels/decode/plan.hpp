#pragma once
// Host-side planning of the decode kernels (plain C++, built with and without CUDA): what the
// routing words hold, the split-K plan over the cache with its cuts balanced by route cost, and
// the one launch plan of a call (mainloop, CTAs, splits, combine) that the dispatcher launches,
// the apps report and whose cuts the emulator runs.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/choices/compute_capability.hpp"
#include "core/choices/decode.hpp"
#include "core/decode/decode_case.hpp"
#include "core/decode/decode_shape.hpp"
#include "core/decode/split_plan.hpp"
#include "core/routing/plan.hpp"

namespace tilemix {

// The routes the words [hk][batch] give the key tiles of every sequence (bit t / groups[b] of a
// word routes tile t to INT8; tiles of groups past bit 63 are FP16-routed, as on the GPU).
DecodeRoutes decode_routes(const DecodeShape& shape, const std::vector<uint64_t>& words,
                           const std::vector<int>& groups);

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

// What a caller may fix of a decode launch; plan_decode_launch resolves the rest, and what these
// leave automatic.
struct DecodeLaunchChoices {
  // > 0: every sequence cut into splits of this many key tiles (a config's tiles_per_split); 0:
  // splits sized for the GPU's waves (make_decode_split_plan), balanced by route where routing is
  // given.
  int tiles_per_split = 0;
  // The INT8 cache's mainloop; the FP16 cache always runs mma.sync.
  DecodeMainloop mainloop = DecodeMainloop::automatic;
  DecodeCombineWait combine = DecodeCombineWait::automatic;
  // Given: these cuts instead of any of the above (tests of hand-made or uneven cuts).
  std::optional<DecodeSplitPlan> splits;
};

// The choices of a config's decode case.
DecodeLaunchChoices decode_launch_choices(const DecodeCaseSpec& spec);

// Everything the launch of one decode call needs, resolved once for a shape, a cache and a GPU:
// the dispatcher launches it as it is (gpu::DecodeParams::plan), the apps report it and the
// emulator runs its cuts.
struct DecodeLaunchPlan {
  CacheKind cache = CacheKind::int8;
  // The shape it was made for, which the launch checks a call against.
  int hq = 0, hk = 0, d = 0, max_new_tokens = 0;
  int sm_count = 0;  // multiprocessors of the GPU it was made for
  DecodeMainloop mainloop = DecodeMainloop::mma_sync;  // resolved, never automatic
  // One CTA serves a (split, KV head, head chunk): the chunk's query heads x max_new_tokens rows.
  // A chunk holds all of a KV head's query heads unless they pass gpu::kDecodeMaxRows rows.
  int heads_per_cta = 0;
  int head_chunks = 0;  // CTAs per (KV head, split)
  int cta_rows = 0;     // heads_per_cta x max_new_tokens
  // CTAs of the kernel one multiprocessor keeps resident: the splits are sized by waves of
  // sm_count x resident_ctas CTAs.
  int resident_ctas = 0;
  DecodeSplitPlan splits;
  int64_t ctas = 0;  // the decode grid: total splits x hk x head chunks
  // What the combine of the partial states waits for (grid or sequence); automatic where no
  // sequence is cut and no combine runs.
  DecodeCombineWait combine = DecodeCombineWait::automatic;
};

// The GPU a decode launch is planned for: its multiprocessors and its compute capability (sm_90
// unless given; a count alone converts, as the plans of tests and estimates without a device do).
struct DecodeTarget {
  DecodeTarget(int sm_count_, ComputeCapability cc_ = {}) : sm_count(sm_count_), cc(cc_) {}  // implicit from a count
  int sm_count;
  ComputeCapability cc;
};

// Whether a resolved decode `mainloop` runs on a GPU of compute capability `cc`: wgmma is built for
// sm_90a alone.
inline bool decode_mainloop_runs_on(DecodeMainloop mainloop, ComputeCapability cc) {
  return mainloop != DecodeMainloop::wgmma || cc.runs_sm90a();
}
// Throws std::invalid_argument naming the GPU (`gpu`), its compute capability and the mainloop
// where it does not (the apps check a config's cases with it before any runs, the dispatcher every
// call).
void require_decode_mainloop_runs(DecodeMainloop mainloop, ComputeCapability cc, const std::string& gpu);

// The launch plan of a decode call of `cache` with this shape on GPU `target` (its multiprocessors
// size the splits; `automatic` takes the wgmma mainloop on sm_90 alone). The INT8 and FP16 kernels keep different numbers of CTAs resident, so their
// splits differ. With `routing` (the INT8 cache's plan) the cuts are balanced by the kernel's route
// costs (gpu::decode_fp16_tile_cost, averaged over the KV heads). The combine waits per sequence
// only where several sequences span more than one wave of CTAs (kernels/decode/plan.cpp says why).
DecodeLaunchPlan plan_decode_launch(const DecodeShape& shape, CacheKind cache, DecodeTarget target,
                                    const DecodeLaunchChoices& choices = {}, const RoutingPlan* routing = nullptr);

}  // namespace tilemix
