#pragma once
// FP16 group sets of the generated layouts (SPEC 4, paper appendix B), one bitmask per query-tile
// row (bit j set: group j on the FP16 path). Every set is clipped to the row's legal groups.
#include <cstdint>
#include <vector>

#include "core/tiling.hpp"

namespace tilemix::layouts {

inline int popcount(uint64_t x) { return __builtin_popcountll(x); }

// Bits [0, n) set.
inline uint64_t low_bits(int64_t n) {
  if (n <= 0) return 0;
  return n >= 64 ? ~0ull : (1ull << n) - 1ull;
}

// Groups [lo, hi] (inclusive) that are also in [0, legal_end).
inline uint64_t group_range(int64_t lo, int64_t hi, int legal_end) {
  if (lo < 0) lo = 0;
  if (hi > legal_end - 1) hi = legal_end - 1;
  if (hi < lo) return 0;
  return low_bits(hi + 1) & ~low_bits(lo);
}

// floor(a / b) for b > 0, also for negative a.
inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// gamma(m): the key group of the diagonal at the first row of query tile m (bottom-right aligned).
inline int64_t band_center(const SequenceTiling& t, int m) {
  return floor_div(t.row_begin(m) + t.lk - t.lq, t.mask_width);
}

// band(w): legal groups within w of gamma(m); empty for w < 0.
inline uint64_t band_fp16(const SequenceTiling& t, int m, int64_t w) {
  if (w < 0) return 0;
  const int64_t c = band_center(t, m);
  return group_range(c - w, c + w, t.legal_group_end(m));
}

// global(G): the first G groups.
inline uint64_t global_fp16(const SequenceTiling& t, int m, int64_t g) {
  return group_range(0, g - 1, t.legal_group_end(m));
}

// The `count` highest-indexed legal groups (align_sparse).
inline uint64_t top_groups(const SequenceTiling& t, int m, int64_t count) {
  const int n = t.legal_group_end(m);
  return group_range(n - count, n - 1, n);
}

// align_sparse(alpha, beta): a(m) = ceil(alpha + beta*m), at least 0, at most the legal groups.
int64_t align_sparse_count(double alpha, double beta, int m);

// rowrand: FP16 groups kept by a row for FP16 fraction f: floor(f * legal + 0.5).
inline int rowrand_count(double f, int legal) { return static_cast<int>(f * legal + 0.5); }

// Per-row seeded permutations of the legal groups. Row m draws with SplitMix64(mix_seed(seed, m))
// a forward Fisher-Yates shuffle of {0, ..., L_m - 1}: for i = 0 .. L_m - 2, swap entry i with
// entry i + below(L_m - i). A row keeping k groups in FP16 keeps the first k entries, so the sets
// are nested in k and do not depend on the requested ratio.
class RowShuffles {
 public:
  RowShuffles(const SequenceTiling& t, uint64_t seed);
  // Mask of the first k entries of row m's permutation (k clamped to [0, L_m]).
  uint64_t first(int m, int k) const;

 private:
  std::vector<int64_t> offset_;   // per row: start of its prefix masks
  std::vector<int> legal_;        // per row: L_m
  std::vector<uint64_t> prefix_;  // per row: L_m + 1 prefix masks
};

// sptrans(s, c): groups holding a key that some query of tile m selects under the strided pattern
// of paper appendix B (see fp16_sets.cpp). Requires s > 0 and c >= 0.
class SptransPattern {
 public:
  SptransPattern(const SequenceTiling& t, int64_t s, int64_t c);
  uint64_t fp16(int m) const;

 private:
  const SequenceTiling& t_;
  int64_t s_;
  uint64_t reachable_ = 0;  // groups met by some stride's tail
};

}  // namespace tilemix::layouts
