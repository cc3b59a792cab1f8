#include "core/routing/layouts/fp16_sets.hpp"

#include <algorithm>
#include <cmath>

#include "core/routing/rng.hpp"

namespace tilemix::layouts {

int64_t align_sparse_count(double alpha, double beta, int m) {
  const double a = std::ceil(alpha + beta * m);
  if (!(a > 0.0)) return 0;
  return a >= static_cast<double>(kMaxGroups) ? kMaxGroups : static_cast<int64_t>(a);
}

RowShuffles::RowShuffles(const SequenceTiling& t, uint64_t seed) {
  offset_.resize(t.tm);
  legal_.resize(t.tm);
  int64_t total = 0;
  for (int m = 0; m < t.tm; ++m) {
    legal_[m] = t.legal_group_end(m);
    offset_[m] = total;
    total += legal_[m] + 1;
  }
  prefix_.resize(total);
  int order[kMaxGroups];
  for (int m = 0; m < t.tm; ++m) {
    const int n = legal_[m];
    for (int i = 0; i < n; ++i) order[i] = i;
    SplitMix64 rng(mix_seed(seed, static_cast<uint64_t>(m)));
    for (int i = 0; i + 1 < n; ++i) {
      const int j = i + static_cast<int>(rng.below(static_cast<uint64_t>(n - i)));
      std::swap(order[i], order[j]);
    }
    uint64_t* p = &prefix_[offset_[m]];
    p[0] = 0;
    for (int i = 0; i < n; ++i) p[i + 1] = p[i] | (1ull << order[i]);
  }
}

uint64_t RowShuffles::first(int m, int k) const {
  return prefix_[offset_[m] + std::clamp(k, 0, legal_[m])];
}

// Query position i selects, with p = i + Lk - Lq (its key-space position, clamped to >= 0) and
// u = floor(p / s), the keys K_p = [u*s, p] U (for r < u) [max(r*s, (r+1)*s - c), (r+1)*s - 1].
// Over the rows p0..p1 of a tile the local parts chain into [floor(p0/s)*s, p1], and the tails are
// those of strides r < floor(p1/s). Tail r ends at t*s - 1 (t = r + 1) and starts at t*s - min(c, s),
// so it meets keys [a, b] iff ceil((a+1)/s) <= t <= floor((b + min(c, s))/s). The lower bound grows
// with the group index, so the groups met by tails 1..T are the tail-reachable groups below
// (T*s - 1) / mask_width + 1.
// Non-causal problems take the bidirectional form: the query's whole stride and the tails of every
// stride, so that (as in the causal case) large strides and tails reach every coverage down to 0.
SptransPattern::SptransPattern(const SequenceTiling& t, int64_t s, int64_t c) : t_(t), s_(s) {
  const int64_t tail = std::min(c, s);
  if (tail == 0) return;
  for (int j = 0; j < t.tmask; ++j) {
    const int64_t lo = std::max<int64_t>(1, (t.group_begin(j) + s) / s);
    const int64_t hi = (t.group_end(j) - 1 + tail) / s;
    if (lo <= hi) reachable_ |= 1ull << j;
  }
}

uint64_t SptransPattern::fp16(int m) const {
  const int legal = t_.legal_group_end(m);
  if (legal == 0) return 0;
  const int64_t p0 = std::max<int64_t>(0, t_.row_begin(m) + t_.lk - t_.lq);
  const int64_t p1 = std::max<int64_t>(0, t_.row_end(m) - 1 + t_.lk - t_.lq);
  const int64_t local_begin = (p0 / s_) * s_;
  const int64_t local_end = t_.causal ? p1 : (p1 / s_ + 1) * s_ - 1;
  const int64_t last_tail = t_.causal ? p1 / s_ : (t_.lk + s_ - 1) / s_;
  const int64_t tail_groups = last_tail == 0 ? 0 : (last_tail * s_ - 1) / t_.mask_width + 1;
  const uint64_t local = group_range(local_begin / t_.mask_width, local_end / t_.mask_width, legal);
  return local | (reachable_ & low_bits(tail_groups) & low_bits(legal));
}

}  // namespace tilemix::layouts
