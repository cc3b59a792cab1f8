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

// Key tiles of a sequence of `cache_len` tokens.
inline int64_t decode_key_tiles(int64_t cache_len) {
  return (cache_len + kDecodeGeometry.block_n - 1) / kDecodeGeometry.block_n;
}

}  // namespace tilemix
