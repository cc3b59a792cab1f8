#pragma once
// Layout `adaptive` (SPEC 4, beyond the paper): the FP16 groups are chosen from Q and K. Per KV
// head h (query heads H = [h*G, (h+1)*G), G = hq / hk) and sequence:
//
// 1. Pooling. Query tile m (rows r = 0 .. |R| - 1) gives qbar[c] = (lane_0 + ... + lane_7) /
//    float(|R| * G), where lane_w is the FP32 sum over the rows r = w, w + 8, w + 16, ...
//    ascending, and within each row over h' in H ascending, of float(Q[r][h'][c]); every sum runs
//    one addition at a time from 0, the lanes in order; then one division. qmax = max |Q| over the
//    tile's rows, H and the channels (NaN ignored). Key group j (keys K_j of the plan's groups)
//    gives kbar[c] the same way over its keys (lane w: keys w, w + 8, ...), divided by |K_j|, and
//    kmax = max |K| over K_j and the channels.
// 2. Scores, per legal group j of tile m: the mean logit s_j = (fma over c ascending of
//    qbar[c] * kbar[c], from 0) * softmax_scale; the row's largest M (NaN counts as -inf);
//    u_j = cells_j * 2^((s_j - M) * log2 e), with cells_j the legal (query, key) pairs of the
//    group and the project's exp2 (adaptive_math.hpp); the estimated share of the tile's
//    attention mass p_j = u_j / (u_0 + u_1 + ..., summed in j order); and the score
//    p_j * qmax * kmax: the share times the size of the INT8 error that the blocks' absmax scales
//    allow (scale_q * scale_k, up to the factor 127^2).
// 3. Selection, per KV head and sequence over all its legal groups (not row by row): the N
//    highest-scoring groups stay FP16, the first group of every row (the attention sinks) before
//    any score, ties to the lower (m, j). N is data-free: with C_b the legal groups of sequences
//    0..b, N_b = round((1 - ratio) * C_b) - round((1 - ratio) * C_(b-1)) (round half up), so the
//    realized group coverage of the whole plan is the one closest to the ratio.
//
// Why these choices: measured on llm_like inputs with k_channel_bias 8 (docs/config.md, "Layout
// adaptive"). Row-by-row selection (each row keeping round((1 - ratio) * legal) groups) stayed
// above the static `global` layout, as a row near the top of a causal map (few keys, each with a
// large probability) needs more FP16 groups than a long row; the mean logit alone, without the
// share, the error term and the sinks, was far worse; keeping the diagonal group changed nothing.
#include <cstdint>
#include <vector>

#include "core/problem.hpp"
#include "core/routing/layout.hpp"
#include "core/tiling.hpp"

namespace tilemix::layouts {

// What the word builders need besides Q and K; it depends on the tiling and the ratio alone, so
// the GPU's builder takes the same arrays.
struct AdaptiveSchedule {
  int block_m = 0;
  std::vector<int64_t> tile_offset;   // [batch + 1]: the plan's prefix sums of Tm
  std::vector<int> tile_sequence;     // [total tiles]: the sequence of each query tile
  std::vector<int> tile_groups;       // [total tiles]: legal groups of the tile
  std::vector<float> cells;           // [total tiles][64]: legal pairs of each group, 0 past the legal ones
  std::vector<int64_t> group_offset;  // [batch + 1]: prefix sums of Tmask, the rows of the pooled keys
  std::vector<int64_t> mask_width;    // [batch]: keys per group
  std::vector<int64_t> fp16_groups;   // [batch]: N_b, legal groups that each KV head keeps FP16

  int batch() const { return static_cast<int>(mask_width.size()); }
  int64_t total_tiles() const { return tile_offset.back(); }
  int64_t total_groups() const { return group_offset.back(); }
};

AdaptiveSchedule adaptive_schedule(const std::vector<SequenceTiling>& tilings, const std::vector<int64_t>& tile_offset,
                                   double ratio);

// Step 1: the pooled queries and keys.
struct AdaptivePools {
  std::vector<float> qbar;  // [hk][total tiles][d]
  std::vector<float> qmax;  // [hk][total tiles]
  std::vector<float> kbar;  // [hk][total groups][d]
  std::vector<float> kmax;  // [hk][total groups]
};

// q, k: FP16 bits [total_q, hq, d] and [total_k, hk, d].
AdaptivePools pool_inputs(const AttentionShape& shape, const AdaptiveSchedule& schedule,
                          const std::vector<uint16_t>& q, const std::vector<uint16_t>& k);

// Step 2: [hk][total tiles][64] scores; 0 past each tile's legal groups.
std::vector<float> group_scores(const AttentionShape& shape, const AdaptiveSchedule& schedule,
                                const AdaptivePools& pools);

// Step 3: the words [hk][total tiles] (bit j = 1: INT8).
std::vector<uint64_t> select_words(const AttentionShape& shape, const AdaptiveSchedule& schedule,
                                   const std::vector<float>& scores);

// The three steps.
std::vector<uint64_t> adaptive_words(const AttentionShape& shape, const AdaptiveSchedule& schedule,
                                     const std::vector<uint16_t>& q, const std::vector<uint16_t>& k);

// The criterion as the layout's parameters: "score=share*absmax select=sequence sinks=1".
LayoutParams adaptive_params();

}  // namespace tilemix::layouts
