// Heavy-hitter exposure (paper G.5) with importance = the exact attention probability P.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "core/fp16.hpp"
#include "core/metrics.hpp"

namespace tilemix {
namespace {

constexpr int64_t kRowBlock = 64;   // query rows per task; K of the block is converted once per task
constexpr int64_t kFirstTopK = 32;  // heavy-hitter sets are small: sort only a growing prefix

struct RowBlockTask {
  int b;
  int h;
  int64_t row_begin;
};

// Exposure numerator and denominator per tau, summed over one task's rows.
struct ExposureSums {
  std::vector<double> weighted_int8, weight;
};

class RowExposure {
 public:
  RowExposure(const AttentionShape& shape, const AttentionInputs& inputs, const RoutingPlan& plan,
              const std::vector<double>& taus)
      : shape_(shape), inputs_(inputs), plan_(plan), taus_(taus),
        max_tau_(taus.empty() ? 0.0 : *std::max_element(taus.begin(), taus.end())) {}

  ExposureSums run(const RowBlockTask& task) const {
    ExposureSums sums{std::vector<double>(taus_.size(), 0.0), std::vector<double>(taus_.size(), 0.0)};
    const int b = task.b, h = task.h, d = shape_.d;
    const int64_t lq = shape_.seqlen_q(b), lk = shape_.seqlen_k(b);
    const int64_t rows = std::min(kRowBlock, lq - task.row_begin);
    const int64_t keys = visible_keys(task.row_begin + rows - 1, lq, lk, shape_.causal);
    if (keys == 0) return sums;
    const int kvh = shape_.kv_head_of(h);
    const TileGeometry geo = plan_.tilings[b].geometry;

    // K of the visible keys, [d][keys], so each score is one sequential sum over channels.
    std::vector<double> k_t(static_cast<size_t>(d) * keys);
    for (int64_t j = 0; j < keys; ++j) {
      const uint16_t* k = &inputs_.k[(static_cast<size_t>(shape_.cu_seqlens_k[b] + j) * shape_.hk + kvh) * d];
      for (int c = 0; c < d; ++c) k_t[static_cast<size_t>(c) * keys + j] = half_to_float(k[c]);
    }
    std::vector<double> p(keys);
    std::vector<int64_t> order(keys);
    std::vector<double> q(d);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = task.row_begin + r;
      const int64_t n = visible_keys(i, lq, lk, shape_.causal);
      if (n == 0) continue;
      const uint16_t* q_bits = &inputs_.q[(static_cast<size_t>(shape_.cu_seqlens_q[b] + i) * shape_.hq + h) * d];
      for (int c = 0; c < d; ++c) q[c] = half_to_float(q_bits[c]);
      probabilities(q, k_t, keys, n, p);

      // Keys by P descending (ties: lower index first); sort only as far as the largest tau needs.
      const double total = std::accumulate(p.begin(), p.begin() + n, 0.0);
      std::iota(order.begin(), order.begin() + n, int64_t{0});
      auto heavier = [&p](int64_t a, int64_t c) { return p[a] > p[c] || (p[a] == p[c] && a < c); };
      int64_t sorted = 0;
      double top_mass = 0.0;
      for (int64_t want = std::min(n, kFirstTopK);; want = std::min(n, 2 * want)) {
        std::partial_sort(order.begin() + sorted, order.begin() + want, order.begin() + n, heavier);
        for (; sorted < want; ++sorted) top_mass += p[order[sorted]];
        if (top_mass >= max_tau_ * total || sorted == n) break;
      }

      const int m = static_cast<int>(i / geo.block_m);
      for (size_t t = 0; t < taus_.size(); ++t) {
        const double target = taus_[t] * total;
        double mass = 0.0, int8_mass = 0.0;
        for (int64_t s = 0; s < sorted && mass < target; ++s) {
          const int64_t j = order[s];
          mass += p[j];
          if (plan_.int8_route(kvh, b, m, static_cast<int>(j / geo.block_n))) int8_mass += p[j];
        }
        sums.weighted_int8[t] += int8_mass;
        sums.weight[t] += mass;
      }
    }
    return sums;
  }

 private:
  // Softmax over the first n keys of one query row, in double.
  void probabilities(const std::vector<double>& q, const std::vector<double>& k_t, int64_t keys, int64_t n,
                     std::vector<double>& p) const {
    std::fill(p.begin(), p.begin() + n, 0.0);
    for (int c = 0; c < shape_.d; ++c) {
      const double* k = &k_t[static_cast<size_t>(c) * keys];
      const double qc = q[c];
      for (int64_t j = 0; j < n; ++j) p[j] += qc * k[j];
    }
    const double scale = shape_.softmax_scale;
    double row_max = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < n; ++j) row_max = std::max(row_max, p[j] * scale);
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      p[j] = std::exp(p[j] * scale - row_max);
      sum += p[j];
    }
    for (int64_t j = 0; j < n; ++j) p[j] /= sum;
  }

  const AttentionShape& shape_;
  const AttentionInputs& inputs_;
  const RoutingPlan& plan_;
  const std::vector<double>& taus_;
  const double max_tau_;
};

}  // namespace

HeavyHitterExposure heavy_hitter_exposure(const AttentionShape& shape, const AttentionInputs& inputs,
                                          const RoutingPlan& plan, const std::vector<double>& taus) {
  if (!(shape.softmax_scale > 0.0f)) throw std::invalid_argument("heavy_hitter_exposure: softmax_scale is not resolved");
  for (double tau : taus) {
    if (!(tau > 0.0 && tau <= 1.0)) throw std::invalid_argument("heavy_hitter_exposure: tau must be in (0, 1]");
  }
  std::vector<RowBlockTask> tasks;
  for (int b = 0; b < shape.batch(); ++b) {
    for (int h = 0; h < shape.hq; ++h) {
      for (int64_t i = 0; i < shape.seqlen_q(b); i += kRowBlock) tasks.push_back({b, h, i});
    }
  }
  const RowExposure row_exposure(shape, inputs, plan, taus);
  std::vector<ExposureSums> partial(tasks.size());
#pragma omp parallel for schedule(dynamic)
  for (size_t t = 0; t < tasks.size(); ++t) partial[t] = row_exposure.run(tasks[t]);

  // Summed in task order so the result does not depend on the thread count.
  HeavyHitterExposure out;
  out.tau = taus;
  out.exposure.assign(taus.size(), 0.0);
  for (size_t t = 0; t < taus.size(); ++t) {
    double weighted_int8 = 0.0, weight = 0.0;
    for (const ExposureSums& s : partial) {
      weighted_int8 += s.weighted_int8[t];
      weight += s.weight[t];
    }
    out.exposure[t] = weight > 0.0 ? weighted_int8 / weight : 0.0;
  }
  return out;
}

}  // namespace tilemix
