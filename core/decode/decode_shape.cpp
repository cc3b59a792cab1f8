#include "core/decode/decode_shape.hpp"

#include <algorithm>
#include <stdexcept>

#include "core/error.hpp"

namespace tilemix {

int64_t DecodeShape::total_new() const {
  int64_t total = 0;
  for (int64_t n : new_tokens) total += n;
  return total;
}

AttentionShape DecodeShape::attention_shape() const {
  AttentionShape s;
  s.hq = hq;
  s.hk = hk;
  s.d = d;
  s.causal = true;
  s.softmax_scale = softmax_scale;
  s.cu_seqlens_q = prefix_sums(new_tokens);
  s.cu_seqlens_k = prefix_sums(cache_len);
  return s;
}

static std::string field(const std::string& where, const std::string& name) {
  return where.empty() ? name : where + "." + name;
}

void validate_decode(DecodeShape& shape, const std::string& where) {
  if (shape.cache_len.empty()) throw InputError(field(where, "cache_len"), "needs at least one sequence");
  if (shape.new_tokens.size() != shape.cache_len.size()) {
    throw InputError(field(where, "new_tokens"), "has " + std::to_string(shape.new_tokens.size()) +
                                                     " entries but there are " +
                                                     std::to_string(shape.cache_len.size()) + " sequences");
  }
  for (size_t b = 0; b < shape.cache_len.size(); ++b) {
    const std::string index = "[" + std::to_string(b) + "]";
    const int64_t n = shape.new_tokens[b], len = shape.cache_len[b];
    if (n < 1 || n > kMaxDecodeTokens) {
      throw InputError(field(where, "new_tokens" + index),
                       "must be in [1, " + std::to_string(kMaxDecodeTokens) + "], got " + std::to_string(n));
    }
    if (len < n) {
      throw InputError(field(where, "cache_len" + index),
                       "must hold at least the " + std::to_string(n) + " new tokens, got " + std::to_string(len));
    }
  }
  // Heads, head dimension and softmax scale follow the prefill rules (and messages).
  AttentionShape s = shape.attention_shape();
  validate(s, where);
  shape.softmax_scale = s.softmax_scale;
}

// Splits are long enough to amortise each CTA's start (Q load, pipeline fill) and the combine,
// and numerous enough to fill the GPU. With T = sum_b ceil(L_b / 64) key tiles, B sequences, and
// fill(k) = ceil(T / max(1, floor(k * sm_count / hk) - B)) the tiles per split at which hk * total
// splits stays within k CTAs per multiprocessor (each sequence rounds its split count up by less
// than one split, hence the - B):
//   tiles_per_split = max(min_tiles_per_split, fill(6), min(64, fill(2)))
// fill(6) uses up to 6 CTAs per multiprocessor (whole waves for kernels keeping 1, 2 or 3
// resident); the min(64, fill(2)) term keeps splits at 64 tiles (4096 tokens) unless that would
// leave fewer than 2 CTAs per multiprocessor. Measured on an H200 (docs/perf-notes.md): short
// splits filling 6 CTAs per SM cost batch 1 at 128k tokens 15% against 64-tile splits, and
// 64-tile splits with too few CTAs cost short caches up to 2.4x.
DecodeSplitPlan make_decode_split_plan(const DecodeShape& shape, int sm_count, int min_tiles_per_split) {
  if (sm_count < 1) throw std::invalid_argument("make_decode_split_plan: sm_count must be positive");
  if (min_tiles_per_split < 1) throw std::invalid_argument("make_decode_split_plan: min_tiles_per_split must be >= 1");
  if (shape.hk < 1) throw std::invalid_argument("make_decode_split_plan: hk must be positive");
  std::vector<int64_t> tiles(shape.cache_len.size());
  int64_t total_tiles = 0;
  for (size_t b = 0; b < tiles.size(); ++b) {
    tiles[b] = (shape.cache_len[b] + kDecodeGeometry.block_n - 1) / kDecodeGeometry.block_n;
    total_tiles += tiles[b];
  }
  const int64_t batch = static_cast<int64_t>(tiles.size());
  const auto fill = [&](int64_t ctas_per_sm) {
    const int64_t budget = std::max<int64_t>(1, ctas_per_sm * sm_count / shape.hk - batch);
    return (total_tiles + budget - 1) / budget;
  };
  DecodeSplitPlan plan;
  plan.tiles_per_split = static_cast<int>(
      std::max<int64_t>({int64_t{min_tiles_per_split}, fill(6), std::min<int64_t>(64, fill(2))}));
  std::vector<int64_t> splits(tiles.size());
  for (size_t b = 0; b < tiles.size(); ++b) splits[b] = (tiles[b] + plan.tiles_per_split - 1) / plan.tiles_per_split;
  plan.split_offset = prefix_sums(splits);
  return plan;
}

}  // namespace tilemix
