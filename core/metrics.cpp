#include "core/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/fp16.hpp"

namespace tilemix {
namespace {

// Partial sums over fixed chunks, added in chunk order: the result does not depend on threads.
struct Partial {
  double max_abs = 0.0, sum_abs = 0.0, diff2 = 0.0, ref2 = 0.0, out2 = 0.0, dot = 0.0;
  int64_t finite = 0, out_bad = 0, ref_bad = 0;
};
constexpr int64_t kChunk = 1 << 16;

}  // namespace

Deviation deviation(const std::vector<double>& out, const std::vector<double>& ref) {
  if (out.size() != ref.size()) {
    throw std::invalid_argument("deviation: " + std::to_string(out.size()) + " outputs vs " +
                                std::to_string(ref.size()) + " reference values");
  }
  const int64_t n = static_cast<int64_t>(out.size());
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<Partial> parts(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    Partial p;
    for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
      const double o = out[i], r = ref[i];
      const bool o_ok = std::isfinite(o), r_ok = std::isfinite(r);
      p.out_bad += !o_ok;
      p.ref_bad += !r_ok;
      if (!o_ok || !r_ok) continue;
      const double d = o - r;
      p.max_abs = std::max(p.max_abs, std::abs(d));
      p.sum_abs += std::abs(d);
      p.diff2 += d * d;
      p.ref2 += r * r;
      p.out2 += o * o;
      p.dot += o * r;
      ++p.finite;
    }
    parts[c] = p;
  }
  Partial total;
  for (const Partial& p : parts) {
    total.max_abs = std::max(total.max_abs, p.max_abs);
    total.sum_abs += p.sum_abs;
    total.diff2 += p.diff2;
    total.ref2 += p.ref2;
    total.out2 += p.out2;
    total.dot += p.dot;
    total.finite += p.finite;
    total.out_bad += p.out_bad;
    total.ref_bad += p.ref_bad;
  }
  Deviation d;
  d.count = n;
  d.nonfinite = total.out_bad;
  d.ref_nonfinite = total.ref_bad;
  d.max_abs = total.max_abs;
  d.mean_abs = total.finite ? total.sum_abs / static_cast<double>(total.finite) : 0.0;
  if (total.ref2 > 0.0) {
    d.rel_l2 = std::sqrt(total.diff2) / std::sqrt(total.ref2);
  } else {
    d.rel_l2 = total.diff2 > 0.0 ? INFINITY : 0.0;
  }
  if (total.ref2 > 0.0 && total.out2 > 0.0) {
    d.cosine = total.dot / (std::sqrt(total.out2) * std::sqrt(total.ref2));
  } else {
    d.cosine = (total.ref2 == 0.0 && total.out2 == 0.0) ? 1.0 : 0.0;  // one side all zeros
  }
  return d;
}

bool within(const Deviation& d, const Tolerance& t, std::string* why) {
  std::vector<std::string> failures;
  if (d.nonfinite > 0) failures.push_back(fmt::format("{} NaN/Inf values in the output", d.nonfinite));
  if (d.ref_nonfinite > 0) failures.push_back(fmt::format("{} NaN/Inf values in the baseline", d.ref_nonfinite));
  // Written as !(value <= bound) so that a NaN metric fails.
  const auto upper = [&](const char* name, double value, const std::optional<double>& bound) {
    if (bound && !(value <= *bound)) failures.push_back(fmt::format("{} {:.4g} > {:.4g}", name, value, *bound));
  };
  upper("max_abs", d.max_abs, t.max_abs);
  upper("mean_abs", d.mean_abs, t.mean_abs);
  upper("rel_l2", d.rel_l2, t.rel_l2);
  if (t.min_cosine && !(d.cosine >= *t.min_cosine)) {
    failures.push_back(fmt::format("cosine {:.9g} < min_cosine {:.9g}", d.cosine, *t.min_cosine));
  }
  if (why) {
    why->clear();
    for (const auto& f : failures) *why += (why->empty() ? "" : "; ") + f;
  }
  return failures.empty();
}

std::vector<double> half_to_double(const std::vector<uint16_t>& x) {
  std::vector<double> out(x.size());
  const int64_t n = static_cast<int64_t>(x.size());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = half_to_float(x[i]);
  return out;
}

}  // namespace tilemix
