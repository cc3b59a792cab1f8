#include "kernels/decode/plan.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <stdexcept>
#include <string>

#include "kernels/decode/config.hpp"

namespace tilemix {

DecodeRoutes decode_routes(const DecodeShape& shape, const std::vector<uint64_t>& words,
                           const std::vector<int>& groups) {
  const int batch = shape.batch();
  if (words.size() != static_cast<size_t>(shape.hk) * batch || groups.size() != static_cast<size_t>(batch)) {
    throw std::invalid_argument("decode_routes: words must be [hk][batch] and groups [batch]");
  }
  bool int8 = false, fp16 = false;
  for (int b = 0; b < batch; ++b) {
    if (groups[b] < 1) throw std::invalid_argument("decode_routes: a group holds at least one tile");
    const int64_t used = (decode_key_tiles(shape.cache_len[b]) + groups[b] - 1) / groups[b];
    const uint64_t mask = used >= 64 ? ~0ull : (1ull << used) - 1ull;
    fp16 = fp16 || used > 64;
    for (int h = 0; h < shape.hk; ++h) {
      const uint64_t live = words[static_cast<size_t>(h) * batch + b] & mask;
      int8 = int8 || live != 0;
      fp16 = fp16 || live != mask;
    }
  }
  if (int8 && fp16) return DecodeRoutes::mixed;
  return int8 ? DecodeRoutes::all_int8 : DecodeRoutes::all_fp16;
}

namespace {

// Query heads one CTA serves: all of a KV head's, unless heads x max new tokens pass
// gpu::kDecodeMaxRows rows.
int decode_heads_per_cta(int hq, int hk, int max_new_tokens) {
  if (hk < 1 || hq % hk != 0 || max_new_tokens < 1 || max_new_tokens > kMaxDecodeTokens) {
    throw std::invalid_argument("decode_heads_per_cta: needs hq a multiple of hk and 1..16 new tokens");
  }
  return std::min(hq / hk, gpu::kDecodeMaxRows / max_new_tokens);
}

// CTAs per (KV head, split): ceil(hq / hk / decode_heads_per_cta).
int decode_head_chunks(int hq, int hk, int max_new_tokens) {
  const int per_cta = decode_heads_per_cta(hq, hk, max_new_tokens);
  return (hq / hk + per_cta - 1) / per_cta;
}

// Fixed cost of a decode CTA in key tiles: Q load and quantization and the pipeline fill (one
// tile), and for a sequence with several splits writing and combining its partial state (one more).
constexpr int64_t kSplitCostTiles = 2;
constexpr int64_t kWholeCostTiles = 1;

// Time (in tiles) until the last CTA of a plan ends when the CTAs run in grid order, each on the
// first of `slots` slots to free up: `ctas` lists (count, cost) runs in grid order.
int64_t list_schedule_tiles(const std::vector<std::pair<int64_t, int64_t>>& ctas, int64_t slots) {
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<int64_t>> free_at;
  for (int64_t i = 0; i < slots; ++i) free_at.push(0);
  int64_t end = 0;
  for (const auto& [count, cost] : ctas) {
    for (int64_t i = 0; i < count; ++i) {
      const int64_t start = free_at.top();
      free_at.pop();
      free_at.push(start + cost);
      end = std::max(end, start + cost);
    }
  }
  return end;
}

// The CTAs of a plan in which the first `whole` sequences keep all their tiles and the others are
// cut into splits of `per_split` tiles, as (count, cost) runs in grid order.
std::vector<std::pair<int64_t, int64_t>> plan_ctas(const std::vector<int64_t>& tiles, int64_t ctas_per_split,
                                                   size_t whole, int64_t per_split) {
  std::vector<std::pair<int64_t, int64_t>> ctas;
  for (size_t b = 0; b < tiles.size(); ++b) {
    const int64_t splits = b < whole ? 1 : (tiles[b] + per_split - 1) / per_split;
    if (splits == 1) {
      ctas.emplace_back(ctas_per_split, tiles[b] + kWholeCostTiles);
    } else {
      for (int64_t s = 0; s < splits; ++s) {
        ctas.emplace_back(ctas_per_split, std::min(per_split, tiles[b] - s * per_split) + kSplitCostTiles);
      }
    }
  }
  return ctas;
}

}  // namespace

// Model: the decode kernel runs in waves of sm_count * ctas_per_sm CTAs, hk * head chunks CTAs per
// split; a CTA costs its tiles plus kSplitCostTiles, so a uniform plan costs waves *
// (tiles_per_split + kSplitCostTiles). Among the tiles-per-split values that give the longest
// sequence 1, 2, 3, ... splits, the cheapest wins (ties: fewer splits). A wave only a little over
// the slots doubles the cost, which is what happened to one split per sequence at batch 64 and
// 16k tokens (512 CTAs on 396 INT8 slots: 1.29 waves, 79% of the copy bandwidth, where 3.88 waves
// of shorter splits fill their last wave).
// Where whole sequences fill at least one wave, the plan that keeps the first sequences whole (as
// many as fill w waves) and cuts only the rest is priced too, by the time a list schedule of its
// CTAs in grid order takes, and taken where that beats the uniform plan's: at 16k x 64 x 16 new
// tokens, 49 whole sequences and 15 in 3 splits instead of 64 in 3 splits, so that three quarters
// of the rows skip the partial states and the combine (docs/perf/decode.md, decode v21).
DecodeSplitPlan make_decode_split_plan(const DecodeShape& shape, int sm_count, int ctas_per_sm,
                                       int min_tiles_per_split) {
  if (sm_count < 1 || ctas_per_sm < 1) {
    throw std::invalid_argument("make_decode_split_plan: sm_count and ctas_per_sm must be positive");
  }
  if (min_tiles_per_split < 1) throw std::invalid_argument("make_decode_split_plan: min_tiles_per_split must be >= 1");
  if (shape.hk < 1) throw std::invalid_argument("make_decode_split_plan: hk must be positive");
  std::vector<int64_t> tiles(shape.cache_len.size());
  int64_t max_tiles = 1;
  for (size_t b = 0; b < tiles.size(); ++b) {
    tiles[b] = decode_key_tiles(shape.cache_len[b]);
    max_tiles = std::max(max_tiles, tiles[b]);
  }
  const int64_t ctas_per_split =
      static_cast<int64_t>(shape.hk) * decode_head_chunks(shape.hq, shape.hk, std::max(1, shape.max_new_tokens()));
  const int64_t slots = static_cast<int64_t>(sm_count) * ctas_per_sm;

  int64_t best_tiles = std::max<int64_t>(max_tiles, min_tiles_per_split), best_cost = -1;
  int64_t previous = -1;
  for (int64_t splits = 1; splits <= max_tiles; ++splits) {
    const int64_t per_split = std::max<int64_t>(min_tiles_per_split, (max_tiles + splits - 1) / splits);
    if (per_split == previous) continue;
    previous = per_split;
    int64_t ctas = 0;
    for (int64_t t : tiles) ctas += ctas_per_split * ((t + per_split - 1) / per_split);
    const int64_t cost = (ctas + slots - 1) / slots * (per_split + kSplitCostTiles);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best_tiles = per_split;
    }
    if (per_split == min_tiles_per_split) break;
  }
  DecodeSplitPlan plan = fixed_decode_split_plan(shape, static_cast<int>(best_tiles));

  // Whole leading sequences, as many as fill the most whole waves or one wave fewer, then the rest
  // cut: splits of the longest remaining sequence up to kMaxCutSplits (more would only add CTAs to
  // a plan whose first waves are already full). The model leaves out the combine, whose work grows
  // with the splits, so among the candidates within 2% of the cheapest the fewest splits win.
  constexpr int64_t kMaxCutSplits = 16;
  const int64_t batch = static_cast<int64_t>(tiles.size());
  if (batch * ctas_per_split <= slots) return plan;
  struct Candidate {
    int64_t whole, per_split, splits, cost;
  };
  std::vector<Candidate> candidates;
  const int64_t most_waves = (batch * ctas_per_split - 1) / slots;  // whole waves that leave a sequence
  for (int64_t waves = std::max<int64_t>(1, most_waves - 1); waves <= most_waves; ++waves) {
    const int64_t whole = waves * slots / ctas_per_split;
    if (whole >= batch) break;
    int64_t longest_cut = 1;
    for (int64_t b = whole; b < batch; ++b) longest_cut = std::max(longest_cut, tiles[b]);
    for (int64_t splits = 2; splits <= std::min(kMaxCutSplits, longest_cut); ++splits) {
      const int64_t per_split = std::max<int64_t>(min_tiles_per_split, (longest_cut + splits - 1) / splits);
      const auto ctas = plan_ctas(tiles, ctas_per_split, static_cast<size_t>(whole), per_split);
      candidates.push_back({whole, per_split, splits, list_schedule_tiles(ctas, slots)});
      if (per_split == min_tiles_per_split) break;
    }
  }
  // Only candidates that beat the uniform plan's schedule count.
  const int64_t uniform_cost = list_schedule_tiles(plan_ctas(tiles, ctas_per_split, 0, best_tiles), slots);
  int64_t cheapest = uniform_cost;
  for (const Candidate& c : candidates) cheapest = std::min(cheapest, c.cost);
  const Candidate* pick = nullptr;
  for (const Candidate& c : candidates) {
    if (c.cost < uniform_cost && c.cost * 100 <= cheapest * 102 && (pick == nullptr || c.splits < pick->splits)) {
      pick = &c;
    }
  }
  if (pick == nullptr) return plan;
  plan.tiles_per_split = static_cast<int>(pick->per_split);
  std::vector<int64_t> counts(tiles.size(), 1);
  for (int64_t b = pick->whole; b < batch; ++b) counts[b] = (tiles[b] + pick->per_split - 1) / pick->per_split;
  plan.split_offset = prefix_sums(counts);
  return plan;
}

void balance_decode_splits(DecodeSplitPlan& plan, const DecodeShape& shape,
                           const std::function<double(int b, int64_t tile)>& tile_cost) {
  if (plan.split_offset.size() != shape.cache_len.size() + 1 || plan.split_offset[0] != 0) {
    throw std::invalid_argument("balance_decode_splits: the plan is for another batch");
  }
  std::vector<int64_t> first;
  first.reserve(static_cast<size_t>(plan.total_splits()));
  for (int b = 0; b < shape.batch(); ++b) {
    const int64_t tiles = decode_key_tiles(shape.cache_len[b]);
    const int splits = plan.splits(b);
    if (splits < 1 || splits > std::max<int64_t>(1, tiles)) {
      throw std::invalid_argument("balance_decode_splits: a sequence has more splits than key tiles, or none");
    }
    first.push_back(0);
    if (splits == 1) continue;
    std::vector<double> running(static_cast<size_t>(tiles) + 1, 0.0);  // cost of tiles [0, t)
    for (int64_t t = 0; t < tiles; ++t) {
      const double c = tile_cost(b, t);
      if (!(c > 0.0)) throw std::invalid_argument("balance_decode_splits: tile costs must be positive");
      running[t + 1] = running[t] + c;
    }
    for (int s = 1; s < splits; ++s) {
      const double target = running[tiles] * s / splits;
      // The cut nearest the target, after the previous cut and leaving a tile per later split.
      const int64_t lo = first.back() + 1, hi = tiles - (splits - s);
      int64_t cut = std::upper_bound(running.begin() + lo, running.begin() + hi + 1, target) - running.begin();
      cut = std::clamp<int64_t>(cut, lo, hi);
      if (cut > lo && target - running[cut - 1] < running[cut] - target) --cut;
      first.push_back(cut);
    }
  }
  plan.first_tile = std::move(first);
}

DecodeSplitPlan fixed_decode_split_plan(const DecodeShape& shape, int tiles_per_split) {
  if (tiles_per_split < 1) throw std::invalid_argument("fixed_decode_split_plan: tiles_per_split must be >= 1");
  DecodeSplitPlan plan;
  plan.tiles_per_split = tiles_per_split;
  std::vector<int64_t> splits;
  for (int64_t len : shape.cache_len) {
    const int64_t tiles = decode_key_tiles(len);
    splits.push_back((tiles + tiles_per_split - 1) / tiles_per_split);
  }
  plan.split_offset = prefix_sums(splits);
  return plan;
}

void require_decode_mainloop_runs(DecodeMainloop mainloop, ComputeCapability cc, const std::string& gpu) {
  if (decode_mainloop_runs_on(mainloop, cc)) return;
  throw std::invalid_argument("decode mainloop wgmma is built for sm_90a alone; " + gpu + " is sm_" +
                              std::to_string(cc.sm()) + ": use mainloop mma_sync (or auto)");
}

DecodeLaunchChoices decode_launch_choices(const DecodeCaseSpec& spec) {
  DecodeLaunchChoices choices;
  choices.tiles_per_split = spec.tiles_per_split;
  choices.mainloop = spec.mainloop;
  choices.combine = spec.combine;
  return choices;
}

namespace {

// The splits of a launch whose other parts are resolved: fixed, given, or sized by the waves of
// the plan's resident CTAs and balanced by the kernel's route costs.
DecodeSplitPlan launch_splits(const DecodeLaunchPlan& plan, const DecodeShape& shape,
                              const DecodeLaunchChoices& choices, const RoutingPlan* routing) {
  if (choices.splits) return *choices.splits;
  if (choices.tiles_per_split > 0) return fixed_decode_split_plan(shape, choices.tiles_per_split);
  DecodeSplitPlan splits = make_decode_split_plan(shape, plan.sm_count, plan.resident_ctas);
  const double fp16_cost = gpu::decode_fp16_tile_cost(plan.cache, plan.mainloop);
  if (routing != nullptr && fp16_cost != 1.0 && splits.has_cuts()) {
    balance_decode_splits(splits, shape, [&](int b, int64_t tile) {
      int fp16_heads = 0;
      for (int h = 0; h < shape.hk; ++h) fp16_heads += routing->int8_route(h, b, 0, static_cast<int>(tile)) ? 0 : 1;
      return 1.0 + (fp16_cost - 1.0) * fp16_heads / shape.hk;
    });
  }
  return splits;
}

}  // namespace

// The combine waits per sequence only where sequences end at different times, i.e. several
// sequences over several waves (decode v13: -3% at 16k x 64 x 16 new tokens; within one wave, or
// with a single sequence, up to 3% slower than the wait for the grid).
DecodeLaunchPlan plan_decode_launch(const DecodeShape& shape, CacheKind cache, DecodeTarget target,
                                    const DecodeLaunchChoices& choices, const RoutingPlan* routing) {
  const int sm_count = target.sm_count;
  DecodeLaunchPlan plan;
  plan.cache = cache;
  plan.hq = shape.hq;
  plan.hk = shape.hk;
  plan.d = shape.d;
  plan.max_new_tokens = shape.max_new_tokens();
  plan.sm_count = sm_count;
  plan.heads_per_cta = decode_heads_per_cta(shape.hq, shape.hk, plan.max_new_tokens);
  plan.head_chunks = decode_head_chunks(shape.hq, shape.hk, plan.max_new_tokens);
  plan.cta_rows = plan.heads_per_cta * plan.max_new_tokens;
  const DecodeMainloop requested = cache == CacheKind::int8 ? choices.mainloop : DecodeMainloop::mma_sync;
  plan.mainloop = gpu::decode_mainloop(requested, cache, shape.d, plan.cta_rows, target.cc);
  plan.resident_ctas = gpu::decode_resident_ctas(cache, plan.cta_rows, plan.mainloop);
  plan.splits = launch_splits(plan, shape, choices, routing);
  plan.ctas = plan.splits.total_splits() * shape.hk * plan.head_chunks;
  if (plan.splits.has_cuts()) {
    const bool spans_waves = plan.ctas > static_cast<int64_t>(sm_count) * plan.resident_ctas;
    plan.combine = choices.combine != DecodeCombineWait::automatic ? choices.combine
                   : shape.batch() > 1 && spans_waves            ? DecodeCombineWait::sequence
                                                                 : DecodeCombineWait::grid;
  }
  return plan;
}

}  // namespace tilemix
