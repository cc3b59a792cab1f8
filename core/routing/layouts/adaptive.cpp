#include "core/routing/layouts/adaptive.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "core/fp16.hpp"
#include "core/routing/layouts/adaptive_math.hpp"

namespace tilemix::layouts {
namespace {

// Legal pairs of query tile m x group j; the groups every row sees whole skip the row count.
int64_t group_cells(const SequenceTiling& t, int m, int j) {
  const int64_t kb = t.group_begin(j), ke = t.group_end(j);
  const int64_t seen_by_all = visible_keys(t.row_begin(m), t.lq, t.lk, t.causal);
  return ke <= seen_by_all ? (t.row_end(m) - t.row_begin(m)) * (ke - kb) : t.legal_cells(m, kb, ke);
}

int sequence_of(const std::vector<int64_t>& offsets, int64_t index) {
  return static_cast<int>(std::upper_bound(offsets.begin(), offsets.end(), index) - offsets.begin()) - 1;
}

// fmaxf's rule: a NaN operand loses.
float max_magnitude(float running, float x) {
  const float a = std::fabs(x);
  return running < a ? a : running;
}

// The mean of each channel: its lanes [lane][d] added in lane order from 0, then divided.
void sum_lanes(const std::vector<float>& lanes, float count, float* mean) {
  const size_t d = lanes.size() / kAdaptivePoolLanes;
  for (size_t c = 0; c < d; ++c) {
    float sum = 0.0f;
    for (int w = 0; w < kAdaptivePoolLanes; ++w) sum = adaptive_add(sum, lanes[w * d + c]);
    mean[c] = adaptive_div(sum, count);
  }
}

}  // namespace

AdaptiveSchedule adaptive_schedule(const std::vector<SequenceTiling>& tilings, const std::vector<int64_t>& tile_offset,
                                   double ratio) {
  AdaptiveSchedule s;
  s.block_m = tilings.empty() ? 0 : tilings.front().geometry.block_m;
  s.tile_offset = tile_offset;
  s.group_offset.assign(1, 0);
  s.cells.assign(static_cast<size_t>(tile_offset.back()) * kMaxGroups, 0.0f);
  int64_t legal_so_far = 0, fp16_so_far = 0;
  for (size_t b = 0; b < tilings.size(); ++b) {
    const SequenceTiling& t = tilings[b];
    for (int m = 0; m < t.tm; ++m) {
      const int legal = t.legal_group_end(m);
      float* cells = &s.cells[static_cast<size_t>(s.tile_sequence.size()) * kMaxGroups];
      // Rounded here once, so that both builders weigh the groups with the same floats.
      for (int j = 0; j < legal; ++j) cells[j] = static_cast<float>(group_cells(t, m, j));
      s.tile_sequence.push_back(static_cast<int>(b));
      s.tile_groups.push_back(legal);
      legal_so_far += legal;
    }
    s.group_offset.push_back(s.group_offset.back() + t.tmask);
    s.mask_width.push_back(t.mask_width);
    const auto fp16_through =
        static_cast<int64_t>(std::floor((1.0 - ratio) * static_cast<double>(legal_so_far) + 0.5));
    s.fp16_groups.push_back(fp16_through - fp16_so_far);
    fp16_so_far = fp16_through;
  }
  return s;
}

AdaptivePools pool_inputs(const AttentionShape& shape, const AdaptiveSchedule& schedule,
                          const std::vector<uint16_t>& q, const std::vector<uint16_t>& k) {
  const int d = shape.d, hq = shape.hq, hk = shape.hk, heads = shape.group_size();
  const int64_t tiles = schedule.total_tiles(), groups = schedule.total_groups();
  AdaptivePools p;
  p.qbar.assign(static_cast<size_t>(hk) * tiles * d, 0.0f);
  p.qmax.assign(static_cast<size_t>(hk) * tiles, 0.0f);
  p.kbar.assign(static_cast<size_t>(hk) * groups * d, 0.0f);
  p.kmax.assign(static_cast<size_t>(hk) * groups, 0.0f);

  // One task per pooled row; each channel's lanes and their sum in the documented order.
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t task = 0; task < hk * tiles; ++task) {
    const int h = static_cast<int>(task / tiles);
    const int64_t t = task % tiles;
    const int b = schedule.tile_sequence[t];
    const int64_t row0 = shape.cu_seqlens_q[b] + (t - schedule.tile_offset[b]) * schedule.block_m;
    const int64_t rows = std::min<int64_t>(schedule.block_m, shape.cu_seqlens_q[b + 1] - row0);
    std::vector<float> lanes(static_cast<size_t>(kAdaptivePoolLanes) * d, 0.0f);
    float magnitude = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      float* lane = &lanes[static_cast<size_t>(r % kAdaptivePoolLanes) * d];
      for (int hh = h * heads; hh < (h + 1) * heads; ++hh) {
        const uint16_t* x = &q[(static_cast<size_t>(row0 + r) * hq + hh) * d];
        for (int c = 0; c < d; ++c) {
          const float v = half_to_float(x[c]);
          lane[c] = adaptive_add(lane[c], v);
          magnitude = max_magnitude(magnitude, v);
        }
      }
    }
    sum_lanes(lanes, static_cast<float>(rows * heads), &p.qbar[static_cast<size_t>(task) * d]);
    p.qmax[task] = magnitude;
  }

#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t task = 0; task < hk * groups; ++task) {
    const int h = static_cast<int>(task / groups);
    const int64_t g = task % groups;
    const int b = sequence_of(schedule.group_offset, g);
    const int64_t key0 = shape.cu_seqlens_k[b] + (g - schedule.group_offset[b]) * schedule.mask_width[b];
    const int64_t keys = std::min<int64_t>(schedule.mask_width[b], shape.cu_seqlens_k[b + 1] - key0);
    std::vector<float> lanes(static_cast<size_t>(kAdaptivePoolLanes) * d, 0.0f);
    float magnitude = 0.0f;
    for (int64_t r = 0; r < keys; ++r) {
      float* lane = &lanes[static_cast<size_t>(r % kAdaptivePoolLanes) * d];
      const uint16_t* x = &k[(static_cast<size_t>(key0 + r) * hk + h) * d];
      for (int c = 0; c < d; ++c) {
        const float v = half_to_float(x[c]);
        lane[c] = adaptive_add(lane[c], v);
        magnitude = max_magnitude(magnitude, v);
      }
    }
    sum_lanes(lanes, static_cast<float>(keys), &p.kbar[static_cast<size_t>(task) * d]);
    p.kmax[task] = magnitude;
  }
  return p;
}

std::vector<float> group_scores(const AttentionShape& shape, const AdaptiveSchedule& schedule,
                                const AdaptivePools& pools) {
  const int d = shape.d, hk = shape.hk;
  const int64_t tiles = schedule.total_tiles(), groups = schedule.total_groups();
  std::vector<float> scores(static_cast<size_t>(hk) * tiles * kMaxGroups, 0.0f);
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t task = 0; task < hk * tiles; ++task) {
    const int h = static_cast<int>(task / tiles);
    const int64_t t = task % tiles;
    const int b = schedule.tile_sequence[t];
    const int legal = schedule.tile_groups[t];
    const float* qbar = &pools.qbar[static_cast<size_t>(task) * d];
    const int64_t first_group = static_cast<int64_t>(h) * groups + schedule.group_offset[b];
    float logit[kMaxGroups];
    float row_max = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < legal; ++j) {
      const float* kbar = &pools.kbar[static_cast<size_t>(first_group + j) * d];
      float dot = 0.0f;
      for (int c = 0; c < d; ++c) dot = adaptive_fma(qbar[c], kbar[c], dot);
      float s = adaptive_mul(dot, shape.softmax_scale);
      if (s != s) s = -std::numeric_limits<float>::infinity();
      logit[j] = s;
      row_max = row_max < s ? s : row_max;
    }
    const float* cells = &schedule.cells[static_cast<size_t>(t) * kMaxGroups];
    float mass[kMaxGroups];
    float total = 0.0f;
    for (int j = 0; j < legal; ++j) {
      mass[j] = adaptive_mul(cells[j], adaptive_exp2(adaptive_mul(adaptive_add(logit[j], -row_max), kAdaptiveLog2e)));
      total = adaptive_add(total, mass[j]);
    }
    float* out = &scores[static_cast<size_t>(task) * kMaxGroups];
    const float qmax = pools.qmax[task];
    for (int j = 0; j < legal; ++j) {
      const float share = adaptive_div(mass[j], total);
      out[j] = adaptive_mul(adaptive_mul(share, qmax), pools.kmax[first_group + j]);
    }
  }
  return scores;
}

std::vector<uint64_t> select_words(const AttentionShape& shape, const AdaptiveSchedule& schedule,
                                   const std::vector<float>& scores) {
  const int hk = shape.hk, batch = schedule.batch();
  const int64_t tiles = schedule.total_tiles();
  std::vector<uint64_t> words(static_cast<size_t>(hk) * tiles, 0);
#pragma omp parallel for schedule(dynamic)
  for (int64_t task = 0; task < static_cast<int64_t>(hk) * batch; ++task) {
    const int h = static_cast<int>(task / batch), b = static_cast<int>(task % batch);
    const int64_t t0 = schedule.tile_offset[b], t1 = schedule.tile_offset[b + 1];
    const auto key_of = [&](int64_t t, int j) {
      const float score = scores[(static_cast<size_t>(h) * tiles + t) * kMaxGroups + j];
      return adaptive_selection_key(j == 0 ? kAdaptiveKeptKey : adaptive_order_key(score), t - t0, j);
    };
    std::vector<uint64_t> keys;
    for (int64_t t = t0; t < t1; ++t) {
      for (int j = 0; j < schedule.tile_groups[t]; ++j) keys.push_back(key_of(t, j));
    }
    // The keys are distinct: the N largest are the ones at or above the N-th largest.
    const auto fp16 = std::min(static_cast<size_t>(schedule.fp16_groups[b]), keys.size());
    if (fp16 > 0) {
      std::nth_element(keys.begin(), keys.begin() + static_cast<int64_t>(fp16 - 1), keys.end(), std::greater<>());
    }
    for (int64_t t = t0; t < t1; ++t) {
      uint64_t word = 0;
      for (int j = 0; j < schedule.tile_groups[t]; ++j) {
        if (fp16 == 0 || key_of(t, j) < keys[fp16 - 1]) word |= 1ull << j;
      }
      words[static_cast<size_t>(h) * tiles + t] = word;
    }
  }
  return words;
}

std::vector<uint64_t> adaptive_words(const AttentionShape& shape, const AdaptiveSchedule& schedule,
                                     const std::vector<uint16_t>& q, const std::vector<uint16_t>& k) {
  return select_words(shape, schedule, group_scores(shape, schedule, pool_inputs(shape, schedule, q, k)));
}

LayoutParams adaptive_params() { return {{{"sinks", 1.0}}, {{"score", "share*absmax"}, {"select", "sequence"}}}; }

}  // namespace tilemix::layouts
