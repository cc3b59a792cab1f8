#include "reference/exact.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/fp16.hpp"

namespace tilemix {
namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Rows [first, first + count) of head h of a [total, heads, d] FP16 tensor, as doubles.
RowMatrix load_rows(const std::vector<uint16_t>& x, int64_t first, int64_t count, int heads, int h, int d) {
  RowMatrix out(count, d);
  for (int64_t r = 0; r < count; ++r) {
    const uint16_t* src = &x[(static_cast<size_t>(first + r) * heads + h) * d];
    for (int c = 0; c < d; ++c) out(r, c) = half_to_float(src[c]);
  }
  return out;
}

struct RowBlockTask {
  int b;
  int h;
  int64_t row_begin;
};

}  // namespace

ExactResult exact_attention(const AttentionShape& shape, const AttentionInputs& inputs) {
  if (!(shape.softmax_scale > 0.0f)) throw std::invalid_argument("exact_attention: softmax_scale is not resolved");
  const int hq = shape.hq, hk = shape.hk, d = shape.d;
  const int64_t total_q = shape.total_q();
  const double scale = shape.softmax_scale;

  ExactResult result;
  result.o.assign(static_cast<size_t>(total_q) * hq * d, 0.0);
  result.lse.assign(static_cast<size_t>(total_q) * hq, -std::numeric_limits<double>::infinity());

  std::vector<RowBlockTask> tasks;
  for (int b = 0; b < shape.batch(); ++b) {
    for (int h = 0; h < hq; ++h) {
      for (int64_t i = 0; i < shape.seqlen_q(b); i += kExactRowBlock) tasks.push_back({b, h, i});
    }
  }

#pragma omp parallel for schedule(dynamic)
  for (size_t t = 0; t < tasks.size(); ++t) {
    const auto [b, h, i0] = tasks[t];
    const int64_t lq = shape.seqlen_q(b), lk = shape.seqlen_k(b);
    const int64_t rows = std::min(kExactRowBlock, lq - i0);
    // Visible keys grow with the row, so the block's last row bounds the keys it needs.
    const int64_t keys = visible_keys(i0 + rows - 1, lq, lk, shape.causal);
    if (keys == 0) continue;
    const int kvh = shape.kv_head_of(h);
    const int64_t q0 = shape.cu_seqlens_q[b] + i0, k0 = shape.cu_seqlens_k[b];
    const RowMatrix q = load_rows(inputs.q, q0, rows, hq, h, d);
    const RowMatrix k = load_rows(inputs.k, k0, keys, hk, kvh, d);
    const RowMatrix v = load_rows(inputs.v, k0, keys, hk, kvh, d);

    RowMatrix p = (q * k.transpose()) * scale;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t n = visible_keys(i0 + r, lq, lk, shape.causal);
      if (n == 0) {
        p.row(r).setZero();
        continue;
      }
      auto visible = p.row(r).head(n);
      const double row_max = visible.maxCoeff();
      visible = (visible.array() - row_max).exp().matrix();
      const double sum = visible.sum();
      visible /= sum;
      p.row(r).tail(keys - n).setZero();
      result.lse[static_cast<size_t>(h) * total_q + q0 + r] = row_max + std::log(sum);
    }
    const RowMatrix o = p * v;
    for (int64_t r = 0; r < rows; ++r) {
      if (visible_keys(i0 + r, lq, lk, shape.causal) == 0) continue;
      double* dst = &result.o[(static_cast<size_t>(q0 + r) * hq + h) * d];
      for (int c = 0; c < d; ++c) dst[c] = o(r, c);
    }
  }
  return result;
}

std::vector<uint16_t> exact_attention_fp16(const AttentionShape& shape, const AttentionInputs& inputs) {
  return rounded_to_fp16(exact_attention(shape, inputs));
}

std::vector<uint16_t> rounded_to_fp16(const ExactResult& exact) {
  std::vector<uint16_t> o(exact.o.size());
  for (size_t i = 0; i < o.size(); ++i) o[i] = float_to_half(static_cast<float>(exact.o[i]));
  return o;
}

}  // namespace tilemix
