#pragma once
// The routing plan of one attention call: templates per distinct (Lq, Lk) built once (cached),
// broadcast over sequences and KV heads into words laid out [Hk][total_query_tiles] (SPEC 3).
// `adaptive` is the exception: its words depend on Q and K, so its plan is built per input.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/inputs/inputs.hpp"
#include "core/problem.hpp"
#include "core/routing/layout.hpp"

namespace tilemix {

struct RoutingRequest {
  LayoutKind layout = LayoutKind::zero;
  double ratio = 0.0;
  uint64_t seed = 0;
  std::optional<int> group;  // nullopt = auto per sequence
  TileGeometry geometry;
  std::string words_file;    // for LayoutKind::file: JSON ({"words": [[hex...] per KV head]}) or .npy uint64
};

struct RoutingPlan {
  RoutingRequest request;
  int hk = 0;
  std::vector<SequenceTiling> tilings;       // per sequence
  std::vector<int> seq_template;             // per sequence: index into templates
  std::vector<RouteTemplate> templates;      // distinct (lq, lk) geometries (file, adaptive: KV head 0's
                                             // words of the first sequence of each)
  std::vector<int64_t> tile_offset;          // B+1 prefix sums of Tm
  std::vector<uint64_t> words;               // [hk][total_tiles]
  Coverage coverage;                         // over every sequence and KV head

  int64_t total_tiles() const { return tile_offset.back(); }
  uint64_t word(int kv_head, int b, int m) const {
    return words[static_cast<size_t>(kv_head) * total_tiles() + tile_offset[b] + m];
  }
  // Route of key tile n of query tile m of sequence b: 1 = INT8.
  bool int8_route(int kv_head, int b, int m, int n) const {
    return (word(kv_head, b, m) >> (n / tilings[b].g)) & 1ull;
  }
  // Per-sequence g, as the kernels take it.
  std::vector<int> groups() const;
};

// True when every step of `tiles_per_step` consecutive key tiles (aligned at multiples of it, the
// last step of a query tile cut at its legal tiles) takes one route in every query tile and KV head
// under `words` (laid out as RoutingPlan::words): a kernel that updates its softmax once per step
// may then take one score product per step. Always true when every g is a multiple of
// tiles_per_step, and for plans of one route.
bool uniform_steps(const RoutingPlan& plan, const std::vector<uint64_t>& words, int tiles_per_step);

// True for the layouts whose words depend on the inputs (`adaptive`): their plans need them.
bool routes_from_data(LayoutKind layout);

// Builds the plan; throws InputError (naming `where` fields) for bad ratios, g, or word files.
// A layout that routes from the data needs the second form, which reads Q and K of `inputs`
// (the first throws std::invalid_argument for it).
RoutingPlan make_plan(const AttentionShape& shape, const RoutingRequest& request, const std::string& where = "");
RoutingPlan make_plan(const AttentionShape& shape, const RoutingRequest& request, const AttentionInputs& inputs,
                      const std::string& where = "");

// True when `plan` was built for `shape`: same KV heads and sequences, each sequence's lengths and
// mask, and words for every query tile. The emulators check this before trusting a plan.
bool plan_fits(const AttentionShape& shape, const RoutingPlan& plan);

// Replaces the plan's words with explicit per-head words (a user's own policy) and recomputes
// coverage. `words` must hold hk * total_tiles entries; bits beyond Tmask are an error.
void set_explicit_words(RoutingPlan& plan, std::vector<uint64_t> words, const std::string& where);

// Reads words from a JSON or .npy file for `plan`'s shape (hk x total tiles).
std::vector<uint64_t> read_words_file(const std::string& path, int hk, int64_t total_tiles);

std::string word_hex(uint64_t w);  // "0x00000000000000ff"

}  // namespace tilemix
