#include "core/routing/layout.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "core/error.hpp"
#include "core/routing/layouts/fp16_sets.hpp"

namespace tilemix {

namespace {

struct LayoutInfo {
  LayoutKind kind;
  const char* description;
};

constexpr LayoutInfo kLayouts[] = {
    {LayoutKind::zero, "every legal group FP16 (the full-precision reference)"},
    {LayoutKind::one, "every legal group INT8 (the uniform low-precision reference)"},
    {LayoutKind::band, "FP16 band of half-width w groups around the bottom-right aligned diagonal"},
    {LayoutKind::global, "the first G key groups (sink tokens) FP16 in every row"},
    {LayoutKind::rowrand, "a seeded uniform random share fp16_fraction of each row's legal groups FP16"},
    {LayoutKind::align_sparse, "the ceil(alpha + beta*m) right-most legal groups of query tile m FP16"},
    {LayoutKind::bigbird, "band(w) + global(G) + rowrand(fp16_fraction) FP16, sizes chosen jointly"},
    {LayoutKind::sptrans,
     "Sparse Transformer strides: each query's own stride of s keys and the last c keys of earlier strides "
     "(of every stride when not causal) FP16"},
    {LayoutKind::adaptive,
     "from Q and K: per KV head and sequence the groups with the largest estimated attention-mass share times "
     "INT8 error, and every row's sink group, FP16"},
    {LayoutKind::file, "explicit per-KV-head words read from a JSON or .npy file"},
};

const LayoutInfo& info(LayoutKind k) {
  for (const auto& l : kLayouts) {
    if (l.kind == k) return l;
  }
  throw std::logic_error("unknown LayoutKind");
}

// Shortest decimal text that reads back as the same double.
std::string format_number(double v) {
  if (std::nearbyint(v) == v && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string param_field(const std::string& name) { return "params." + name; }

int64_t int_param(const LayoutParams& p, const std::string& name, int64_t min) {
  const double v = p.get(name);
  if (!(v >= static_cast<double>(min)) || std::nearbyint(v) != v || v > 1e15) {
    throw InputError(param_field(name), "must be an integer >= " + std::to_string(min) + ", got " + format_number(v));
  }
  return static_cast<int64_t>(v);
}

double fraction_param(const LayoutParams& p, const std::string& name) {
  const double v = p.get(name);
  if (!(v >= 0.0 && v <= 1.0)) throw InputError(param_field(name), "must be in [0, 1], got " + format_number(v));
  return v;
}

double nonnegative_param(const LayoutParams& p, const std::string& name) {
  const double v = p.get(name);
  if (!(v >= 0.0) || !std::isfinite(v)) {
    throw InputError(param_field(name), "must be a finite number >= 0, got " + format_number(v));
  }
  return v;
}

// Words from a per-row FP16 set: every legal group outside the set is INT8.
template <class Fp16Set>
std::vector<uint64_t> words_from(const SequenceTiling& t, Fp16Set fp16) {
  std::vector<uint64_t> words(t.tm);
  for (int m = 0; m < t.tm; ++m) words[m] = legal_group_mask(t, m) & ~fp16(m);
  return words;
}

// FP16 legal groups over all rows under a per-row FP16 set (already clipped to legal groups).
template <class Fp16Set>
int64_t fp16_total(const SequenceTiling& t, Fp16Set fp16) {
  int64_t n = 0;
  for (int m = 0; m < t.tm; ++m) n += layouts::popcount(fp16(m));
  return n;
}

int64_t legal_total(const SequenceTiling& t) {
  int64_t n = 0;
  for (int m = 0; m < t.tm; ++m) n += t.legal_group_end(m);
  return n;
}

double group_coverage(int64_t fp16, int64_t legal) { return Coverage::ratio(legal - fp16, legal); }

// Keeps the first grid point whose realized group coverage is strictly closest to the ratio.
class GridSearch {
 public:
  GridSearch(double ratio, int64_t legal) : ratio_(ratio), legal_(legal) {}
  void offer(int64_t fp16, LayoutParams params) {
    const double err = std::fabs(group_coverage(fp16, legal_) - ratio_);
    if (found_ && err >= best_err_) return;
    best_err_ = err;
    found_ = true;
    params_ = std::move(params);
  }
  const LayoutParams& best() const { return params_; }

 private:
  double ratio_;
  int64_t legal_;
  bool found_ = false;
  double best_err_ = 0.0;
  LayoutParams params_;
};

constexpr int kFractionSteps = 256;  // rowrand/bigbird grid: fp16_fraction = k / 256
constexpr int kBetaSteps = 16;       // align_sparse grid: beta = k / 16, up to 4
constexpr int kBetaMax = 4;

LayoutParams band_params(int64_t w) { return {{{"w", static_cast<double>(w)}}}; }
LayoutParams global_params(int64_t g) { return {{{"G", static_cast<double>(g)}}}; }
LayoutParams fraction_params(double f) { return {{{"fp16_fraction", f}}}; }
LayoutParams align_params(double alpha, double beta) { return {{{"alpha", alpha}, {"beta", beta}}}; }
LayoutParams bigbird_params(int64_t w, int64_t g, double f) {
  return {{{"w", static_cast<double>(w)}, {"G", static_cast<double>(g)}, {"fp16_fraction", f}}};
}
LayoutParams sptrans_params(int64_t s, int64_t c) {
  return {{{"s", static_cast<double>(s)}, {"c", static_cast<double>(c)}}};
}

// bigbird: rowrand over the legal groups, on top of band(w) U global(G).
uint64_t bigbird_fp16(const SequenceTiling& t, const layouts::RowShuffles& shuffles, int m, int64_t w, int64_t g,
                      double f) {
  return layouts::band_fp16(t, m, w) | layouts::global_fp16(t, m, g) |
         shuffles.first(m, layouts::rowrand_count(f, t.legal_group_end(m)));
}

// Best fp16_fraction on the k/256 grid for fixed band and global sizes.
double search_bigbird_fraction(const SequenceTiling& t, const layouts::RowShuffles& shuffles,
                               const std::vector<uint64_t>& fixed, double ratio, int64_t legal) {
  GridSearch search(ratio, legal);
  for (int k = 0; k <= kFractionSteps; ++k) {
    const double f = static_cast<double>(k) / kFractionSteps;
    search.offer(fp16_total(t, [&](int m) {
                   return fixed[m] | shuffles.first(m, layouts::rowrand_count(f, t.legal_group_end(m)));
                 }),
                 fraction_params(f));
  }
  return search.best().get("fp16_fraction");
}

// bigbird sizes: budget T = (1 - ratio) * mean legal groups per row, split in thirds between the
// band (w), the global prefix (G) and the random groups. While band and global alone already leave
// the coverage more than 0.01 below the ratio, the larger of w + 1 and G (G on ties) shrinks by one.
LayoutParams search_bigbird(const SequenceTiling& t, double ratio, const layouts::RowShuffles& shuffles) {
  const int64_t legal = legal_total(t);
  int rows = 0;
  for (int m = 0; m < t.tm; ++m) rows += t.legal_group_end(m) > 0;
  const double budget = rows == 0 ? 0.0 : (1.0 - ratio) * static_cast<double>(legal) / rows;
  int64_t w = -1, g = 0;
  if (budget > 0.0) {
    w = std::max<int64_t>(0, std::llround((budget / 3.0 - 1.0) / 2.0));
    g = std::max<int64_t>(1, std::llround(budget / 3.0));
  }
  std::vector<uint64_t> fixed(t.tm);
  for (;;) {
    for (int m = 0; m < t.tm; ++m) fixed[m] = layouts::band_fp16(t, m, w) | layouts::global_fp16(t, m, g);
    const bool at_minimum = w == -1 && g == 0;
    if (at_minimum || group_coverage(fp16_total(t, [&](int m) { return fixed[m]; }), legal) >= ratio - 0.01) break;
    if (w + 1 > g) {
      --w;
    } else {
      --g;
    }
  }
  return bigbird_params(w, g, search_bigbird_fraction(t, shuffles, fixed, ratio, legal));
}

LayoutParams search_params(const SequenceTiling& t, LayoutKind layout, double ratio, uint64_t seed) {
  using namespace layouts;
  GridSearch search(ratio, legal_total(t));
  switch (layout) {
    case LayoutKind::zero:
    case LayoutKind::one:
      return {};
    case LayoutKind::band:
      for (int64_t w = -1; w <= t.tmask; ++w) {
        search.offer(fp16_total(t, [&](int m) { return band_fp16(t, m, w); }), band_params(w));
      }
      break;
    case LayoutKind::global:
      for (int64_t g = 0; g <= t.tmask; ++g) {
        search.offer(fp16_total(t, [&](int m) { return global_fp16(t, m, g); }), global_params(g));
      }
      break;
    case LayoutKind::rowrand:
      for (int k = 0; k <= kFractionSteps; ++k) {
        const double f = static_cast<double>(k) / kFractionSteps;
        int64_t fp16 = 0;
        for (int m = 0; m < t.tm; ++m) fp16 += rowrand_count(f, t.legal_group_end(m));
        search.offer(fp16, fraction_params(f));
      }
      break;
    case LayoutKind::align_sparse:
      for (int alpha = 0; alpha <= t.tmask; ++alpha) {
        for (int k = 0; k <= kBetaMax * kBetaSteps; ++k) {
          const double beta = static_cast<double>(k) / kBetaSteps;
          int64_t fp16 = 0;
          for (int m = 0; m < t.tm; ++m) {
            fp16 += std::min<int64_t>(t.legal_group_end(m), align_sparse_count(alpha, beta, m));
          }
          search.offer(fp16, align_params(alpha, beta));
        }
      }
      break;
    case LayoutKind::bigbird:
      return search_bigbird(t, ratio, RowShuffles(t, seed));
    case LayoutKind::sptrans: {
      const int64_t mw = t.mask_width;
      // At least one stride, so that a sequence with no keys still gets parameters.
      for (int k = 1; k <= std::max(1, t.tmask); ++k) {
        const int64_t s = k * mw;
        std::vector<int64_t> tails = {0, mw / 2};
        for (int64_t c = mw; c <= s; c += mw) tails.push_back(c);
        for (const int64_t c : tails) {
          const SptransPattern pattern(t, s, c);
          search.offer(fp16_total(t, [&](int m) { return pattern.fp16(m); }), sptrans_params(s, c));
        }
      }
      break;
    }
    case LayoutKind::adaptive:
    case LayoutKind::file:
      throw std::logic_error(std::string("layout `") + to_string(layout) +
                             "` has no parameter search; its words come from the inputs or a file");
  }
  return search.best();
}

}  // namespace

const char* layout_description(LayoutKind k) { return info(k).description; }

std::vector<LayoutKind> generated_layouts() {
  std::vector<LayoutKind> v;
  for (LayoutKind k : enum_values(kLayoutNames)) {
    if (k != LayoutKind::adaptive && k != LayoutKind::file) v.push_back(k);
  }
  return v;
}

double LayoutParams::get(const std::string& name) const {
  for (const auto& [key, value] : values) {
    if (key == name) return value;
  }
  throw InputError(param_field(name), "missing layout parameter");
}

std::string LayoutParams::to_string() const {
  std::string s;
  for (const auto& [key, choice] : choices) s += (s.empty() ? "" : " ") + key + "=" + choice;
  for (const auto& [key, value] : values) s += (s.empty() ? "" : " ") + key + "=" + format_number(value);
  return s;
}

std::vector<uint64_t> layout_words(const SequenceTiling& t, LayoutKind layout, const LayoutParams& params,
                                   uint64_t seed) {
  using namespace layouts;
  switch (layout) {
    case LayoutKind::zero:
      return std::vector<uint64_t>(t.tm, 0);
    case LayoutKind::one:
      return words_from(t, [](int) { return uint64_t{0}; });
    case LayoutKind::band: {
      const int64_t w = int_param(params, "w", -1);
      return words_from(t, [&](int m) { return band_fp16(t, m, w); });
    }
    case LayoutKind::global: {
      const int64_t g = int_param(params, "G", 0);
      return words_from(t, [&](int m) { return global_fp16(t, m, g); });
    }
    case LayoutKind::rowrand: {
      const double f = fraction_param(params, "fp16_fraction");
      const RowShuffles shuffles(t, seed);
      return words_from(t, [&](int m) { return shuffles.first(m, rowrand_count(f, t.legal_group_end(m))); });
    }
    case LayoutKind::align_sparse: {
      const double alpha = nonnegative_param(params, "alpha");
      const double beta = nonnegative_param(params, "beta");
      return words_from(t, [&](int m) { return top_groups(t, m, align_sparse_count(alpha, beta, m)); });
    }
    case LayoutKind::bigbird: {
      const int64_t w = int_param(params, "w", -1);
      const int64_t g = int_param(params, "G", 0);
      const double f = fraction_param(params, "fp16_fraction");
      const RowShuffles shuffles(t, seed);
      return words_from(t, [&](int m) { return bigbird_fp16(t, shuffles, m, w, g, f); });
    }
    case LayoutKind::sptrans: {
      const int64_t s = int_param(params, "s", 1);
      const int64_t c = int_param(params, "c", 0);
      const SptransPattern pattern(t, s, c);
      return words_from(t, [&](int m) { return pattern.fp16(m); });
    }
    case LayoutKind::adaptive:
    case LayoutKind::file:
      break;
  }
  throw std::logic_error(std::string("layout `") + to_string(layout) +
                         "` has no words of its own; they come from the inputs or a file (make_plan)");
}

RouteTemplate search_layout(const SequenceTiling& t, LayoutKind layout, double ratio, uint64_t seed) {
  if (!(ratio >= 0.0 && ratio <= 1.0)) {
    throw InputError("ratio", "must be in [0, 1], got " + format_number(ratio));
  }
  RouteTemplate tpl;
  tpl.tiling = t;
  tpl.layout = layout;
  tpl.ratio = ratio;
  tpl.seed = seed;
  tpl.params = search_params(t, layout, ratio, seed);
  tpl.words = layout_words(t, layout, tpl.params, seed);
  tpl.coverage = measure_coverage(t, tpl.words);
  return tpl;
}

}  // namespace tilemix
