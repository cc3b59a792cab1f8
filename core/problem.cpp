#include "core/problem.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/sizes.hpp"

namespace tilemix {

std::vector<int64_t> prefix_sums(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> cu(lengths.size() + 1, 0);
  for (size_t i = 0; i < lengths.size(); ++i) cu[i + 1] = cu[i] + lengths[i];
  return cu;
}

bool supported_head_dim(int d) { return d == 64 || d == 128; }

static std::string field(const std::string& where, const char* name) {
  return where.empty() ? std::string(name) : where + "." + name;
}

static void validate_prefix(const std::vector<int64_t>& cu, const std::string& where, const char* name) {
  if (cu.size() < 2) throw InputError(field(where, name), "needs at least one sequence (batch + 1 prefix sums)");
  if (cu.front() != 0) throw InputError(field(where, name), "prefix sums must start at 0");
  for (size_t i = 1; i < cu.size(); ++i) {
    if (cu[i] < cu[i - 1]) {
      throw InputError(field(where, name), "sequence " + std::to_string(i - 1) + " has negative length " +
                                               std::to_string(cu[i] - cu[i - 1]));
    }
    if (cu[i] - cu[i - 1] > kMaxSeqLen) {
      throw InputError(field(where, name), "sequence " + std::to_string(i - 1) + " has length " +
                                               std::to_string(cu[i] - cu[i - 1]) + " (at most " +
                                               std::to_string(kMaxSeqLen) + ")");
    }
  }
}

void validate(AttentionShape& s, const std::string& where) {
  if (s.hq <= 0) throw InputError(field(where, "hq"), "must be positive, got " + std::to_string(s.hq));
  if (s.hk <= 0) throw InputError(field(where, "hk"), "must be positive, got " + std::to_string(s.hk));
  if (s.hq % s.hk != 0) {
    throw InputError(field(where, "hk"), "hq % hk must be 0 (GQA), got hq=" + std::to_string(s.hq) +
                                             " hk=" + std::to_string(s.hk));
  }
  if (!supported_head_dim(s.d)) {
    throw InputError(field(where, "d"), "unsupported head dimension " + std::to_string(s.d) + " (supported: 64, 128)");
  }
  validate_prefix(s.cu_seqlens_q, where, "seqlens_q");
  validate_prefix(s.cu_seqlens_k, where, "seqlens_k");
  if (s.cu_seqlens_q.size() != s.cu_seqlens_k.size()) {
    throw InputError(field(where, "seqlens_k"), "has " + std::to_string(s.cu_seqlens_k.size() - 1) +
                                                    " sequences but seqlens_q has " +
                                                    std::to_string(s.cu_seqlens_q.size() - 1));
  }
  const std::string shape_where = where.empty() ? std::string("shape") : where;
  checked_product(shape_where, "Q [total_q, hq, d] in doubles",
                  {{s.total_q(), "total_q"}, {s.hq, "hq"}, {s.d, "d"}, {kMaxElementBytes, "bytes"}});
  checked_product(shape_where, "K [total_k, hk, d] in doubles",
                  {{s.total_k(), "total_k"}, {s.hk, "hk"}, {s.d, "d"}, {kMaxElementBytes, "bytes"}});
  if (!(s.softmax_scale >= 0.0f) || !std::isfinite(s.softmax_scale)) {
    throw InputError(field(where, "softmax_scale"), "must be a finite positive number");
  }
  if (s.softmax_scale == 0.0f) s.softmax_scale = 1.0f / std::sqrt(static_cast<float>(s.d));
}

int64_t legal_pairs(const AttentionShape& s) {
  int64_t total = 0;
  for (int b = 0; b < s.batch(); ++b) {
    const int64_t lq = s.seqlen_q(b), lk = s.seqlen_k(b);
    if (!s.causal) {
      total += lq * lk;
      continue;
    }
    for (int64_t i = 0; i < lq; ++i) total += visible_keys(i, lq, lk, true);
  }
  return total;
}

double attention_ops(const AttentionShape& s) {
  return 4.0 * s.d * s.hq * static_cast<double>(legal_pairs(s));
}

}  // namespace tilemix
