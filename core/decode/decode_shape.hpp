#pragma once
// The decode problem (SPEC 5 INT8 KV cache, SPEC 6 item 4): per sequence b, n_b new query tokens
// (1..16) attend to the L_b tokens of that sequence's KV cache, the new tokens' own K/V being the
// last n_b cache entries; causal among the new tokens, bottom-right aligned: query i (0..n_b-1)
// sees cache token j iff j <= i + L_b - n_b. GQA: query head h reads KV head h / (hq / hk).
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/problem.hpp"
#include "core/tiling.hpp"

namespace tilemix {

constexpr int kMaxDecodeTokens = 16;

// Online softmax of decode: a row's running reference m moves only when a tile's maximum passes it
// by more than this (log2 domain), or from -inf; otherwise p = exp2(s - m) <= 2^6 (up to the
// rounding of m + 6) and O, l keep their scale, so the O rescale of most tiles is skipped. 6 keeps
// the FP16 P finite: the INT8 cache folds V's block scale (at most 65504 / 127) into p before the
// FP16 rounding, and 2^6 * 65504 / 127 = 33010 < 65504. Any reference gives the same o and LSE up
// to rounding; a key far below the maximum keeps more of its FP16 precision than with the exact
// maximum as reference.
constexpr float kDecodeRescaleLog2 = 6.0f;

// Which decode mainloop a GPU call runs: mma.sync (every configuration) or wgmma (INT8 cache,
// d = 128, up to 64 query rows per CTA); automatic takes wgmma where it applies and the CTA has
// more than 32 rows (kernels/decode/decode_config.hpp says why).
enum class DecodeMainloop { automatic, mma_sync, wgmma };
const char* to_string(DecodeMainloop m);

// What the combine of split partial states waits for: the whole decode grid, or each sequence's
// own decode CTAs (automatic: per sequence when there are several sequences and the decode grid
// spans more than one wave).
enum class DecodeCombineWait { automatic, grid, sequence };
const char* to_string(DecodeCombineWait w);

// What the routing words of a decode call hold over the key tiles its sequences have: every tile
// INT8-routed, every tile FP16-routed, or both. The wgmma kernel has an instance per kind: one
// route's tile step alone fits 168 registers without the spill of the instance that holds both
// (decode v28, docs/perf-notes.md). `mixed` is right for any words.
enum class DecodeRoutes { mixed, all_int8, all_fp16 };
const char* to_string(DecodeRoutes r);

struct DecodeShape {
  int hq = 0, hk = 0, d = 0;
  float softmax_scale = 0.0f;         // 0 = 1/sqrt(d), resolved by validate_decode
  std::vector<int64_t> cache_len;     // L_b, cache tokens after the new tokens are appended
  std::vector<int64_t> new_tokens;    // n_b in [1, 16], n_b <= L_b

  int batch() const { return static_cast<int>(cache_len.size()); }
  int64_t total_new() const;
  int max_new_tokens() const;  // max n_b
  // The same problem as a prefill AttentionShape (Lq = n_b, Lk = L_b, causal), so routing plans,
  // the exact reference and the metrics apply unchanged.
  AttentionShape attention_shape() const;
};

// Throws InputError naming `where` + field: GQA, head dim, 1 <= n_b <= min(16, L_b), lengths.
void validate_decode(DecodeShape& shape, const std::string& where = "");

// Tile geometry of decode routing: one query tile holds all new tokens of a sequence (16 rows),
// key tiles are one K scale block (64 tokens).
constexpr TileGeometry kDecodeGeometry{16, 64};

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

// Key tiles of a sequence of `cache_len` tokens.
inline int64_t decode_key_tiles(int64_t cache_len) {
  return (cache_len + kDecodeGeometry.block_n - 1) / kDecodeGeometry.block_n;
}

// Query rows of one decode CTA at most: query heads x new tokens of one KV head; more heads are
// split into head chunks of this many rows (the kernel's largest row configuration).
constexpr int kDecodeMaxRows = 128;
// Query heads one CTA serves: all of a KV head's, unless heads x max new tokens pass 128 rows.
int decode_heads_per_cta(int hq, int hk, int max_new_tokens);
// Query rows of a CTA: decode_heads_per_cta x max new tokens.
int decode_cta_rows(int hq, int hk, int max_new_tokens);
// CTAs per (KV head, split): ceil(hq / hk / decode_heads_per_cta).
int decode_head_chunks(int hq, int hk, int max_new_tokens);

// Chooses tiles_per_split (at least `min_tiles_per_split`) for a GPU of `sm_count`
// multiprocessors that keep `ctas_per_sm` decode CTAs resident each: the plan with the fewest
// waves times tiles per split (plus a split's fixed cost), so that the last wave is nearly full
// and long caches at small batch still fill the GPU; where whole sequences fill a wave, possibly
// a plan that keeps the leading sequences whole and cuts only the rest. The model and the
// measurements behind it are in decode_shape.cpp.
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
// runs 1.28x slower per tile, so the call waited for them (decode v25, docs/perf-notes.md).
void balance_decode_splits(DecodeSplitPlan& plan, const DecodeShape& shape,
                           const std::function<double(int b, int64_t tile)>& tile_cost);

}  // namespace tilemix
