#pragma once
// The decode problem (SPEC 5 INT8 KV cache, SPEC 6 item 4): per sequence b, n_b new query tokens
// (1..16) attend to the L_b tokens of that sequence's KV cache, the new tokens' own K/V being the
// last n_b cache entries; causal among the new tokens, bottom-right aligned: query i (0..n_b-1)
// sees cache token j iff j <= i + L_b - n_b. GQA: query head h reads KV head h / (hq / hk).
#include <cstdint>
#include <string>
#include <vector>

#include "core/problem.hpp"
#include "core/tiling.hpp"

namespace tilemix {

constexpr int kMaxDecodeTokens = 16;

struct DecodeShape {
  int hq = 0, hk = 0, d = 0;
  float softmax_scale = 0.0f;         // 0 = 1/sqrt(d), resolved by validate_decode
  std::vector<int64_t> cache_len;     // L_b, cache tokens after the new tokens are appended
  std::vector<int64_t> new_tokens;    // n_b in [1, 16], n_b <= L_b

  int batch() const { return static_cast<int>(cache_len.size()); }
  int64_t total_new() const;
  // The same problem as a prefill AttentionShape (Lq = n_b, Lk = L_b, causal), so routing plans,
  // the exact reference and the metrics apply unchanged.
  AttentionShape attention_shape() const;
};

// Throws InputError naming `where` + field: GQA, head dim, 1 <= n_b <= min(16, L_b), lengths.
void validate_decode(DecodeShape& shape, const std::string& where = "");

// Tile geometry of decode routing: one query tile holds all new tokens of a sequence (16 rows),
// key tiles are one K scale block (64 tokens).
constexpr TileGeometry kDecodeGeometry{16, 64};

// Split-K over the cache: the key tiles of sequence b (ceil(L_b / 64)) are cut into contiguous
// chunks of `tiles_per_split` tiles; chunk s covers tiles [s * tiles_per_split, ...). The kernel
// and the emulator take the same plan, so they combine the same partial states.
struct DecodeSplitPlan {
  int tiles_per_split = 1;
  std::vector<int64_t> split_offset;  // B+1 prefix sums of the split count per sequence
  int64_t total_splits() const { return split_offset.back(); }
  int splits(int b) const { return static_cast<int>(split_offset[b + 1] - split_offset[b]); }
};

// Chooses tiles_per_split so that splits are long (64 tiles) where that still leaves 2 CTAs per
// multiprocessor of `sm_count`, and hk * total splits stays within 6 CTAs per multiprocessor
// (batch 1 at 128k tokens then fills the GPU), with at least `min_tiles_per_split` tiles per
// split. The formula and the measurements behind it are in decode_shape.cpp.
DecodeSplitPlan make_decode_split_plan(const DecodeShape& shape, int sm_count, int min_tiles_per_split = 4);

}  // namespace tilemix
