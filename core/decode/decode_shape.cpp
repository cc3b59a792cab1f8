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

int DecodeShape::max_new_tokens() const {
  int64_t m = 0;
  for (int64_t n : new_tokens) m = std::max(m, n);
  return static_cast<int>(m);
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

}  // namespace tilemix
