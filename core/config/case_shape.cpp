#include "core/config/case_reading.hpp"

#include "core/error.hpp"

namespace tilemix::config_reading {
namespace {

using nlohmann::json;

constexpr int64_t kMaxBatch = int64_t{1} << 20;
constexpr int64_t kMaxHeads = int64_t{1} << 16;

void check_length(int64_t v, const std::string& where) {
  if (v < 0) throw InputError(where, "negative sequence length " + std::to_string(v));
  if (v > kMaxSeqLen) {
    throw InputError(
        where, "sequence length " + std::to_string(v) + " is too large (at most " + std::to_string(kMaxSeqLen) + ")");
  }
}

}  // namespace

void read_lengths(JsonObjectReader& r, const std::string& case_where, AttentionShape& shape) {
  const auto seq_len = r.integer("seq_len");
  const auto lq = r.integer("lq"), lk = r.integer("lk");
  const auto seqlens_q = r.integer_array("seqlens_q"), seqlens_k = r.integer_array("seqlens_k");
  const auto batch = r.integer("batch");
  std::vector<int64_t> lens_q, lens_k;
  if (seqlens_q || seqlens_k) {
    if (!seqlens_q) throw InputError(r.where("seqlens_q"), "is required with seqlens_k (one length per sequence)");
    if (!seqlens_k) throw InputError(r.where("seqlens_k"), "is required with seqlens_q (one length per sequence)");
    if (batch) {
      throw InputError(r.where("batch"), "cannot be combined with seqlens_q/seqlens_k (the batch is their length)");
    }
    if (seqlens_q->empty()) throw InputError(r.where("seqlens_q"), "needs at least one sequence length");
    if (seqlens_k->size() != seqlens_q->size()) {
      throw InputError(r.where("seqlens_k"), "has " + std::to_string(seqlens_k->size()) +
                                                 " lengths but seqlens_q has " + std::to_string(seqlens_q->size()));
    }
    if (seqlens_q->size() > static_cast<size_t>(kMaxBatch)) {
      throw InputError(r.where("seqlens_q"), "has more than " + std::to_string(kMaxBatch) + " sequences");
    }
    for (size_t i = 0; i < seqlens_q->size(); ++i) {
      check_length((*seqlens_q)[i], r.where("seqlens_q") + "[" + std::to_string(i) + "]");
      check_length((*seqlens_k)[i], r.where("seqlens_k") + "[" + std::to_string(i) + "]");
    }
    lens_q = *seqlens_q;
    lens_k = *seqlens_k;
  } else {
    const int64_t b = batch.value_or(1);
    if (b < 1 || b > kMaxBatch) {
      throw InputError(r.where("batch"), "must be in [1, " + std::to_string(kMaxBatch) + "], got " + std::to_string(b));
    }
    if (seq_len) {
      check_length(*seq_len, r.where("seq_len"));
      lens_q.assign(static_cast<size_t>(b), *seq_len);
      lens_k = lens_q;
    } else if (lq || lk) {
      if (!lq) throw InputError(r.where("lq"), "is required with lk");
      if (!lk) throw InputError(r.where("lk"), "is required with lq");
      check_length(*lq, r.where("lq"));
      check_length(*lk, r.where("lk"));
      lens_q.assign(static_cast<size_t>(b), *lq);
      lens_k.assign(static_cast<size_t>(b), *lk);
    } else {
      throw InputError(case_where,
                       "sequence lengths are required: give seq_len, or lq and lk, or seqlens_q and seqlens_k");
    }
  }
  shape.cu_seqlens_q = prefix_sums(lens_q);
  shape.cu_seqlens_k = prefix_sums(lens_k);
}

void read_cache_lengths(JsonObjectReader& r, const std::string& case_where, DecodeShape& shape) {
  const auto cache_len = r.integer("cache_len");
  const auto cache_lens = r.integer_array("cache_lens");
  const auto batch = r.integer("batch");
  const auto check_cache = [](int64_t v, const std::string& where) {
    check_length(v, where);
    if (v < 1) {
      throw InputError(where, "must be >= 1 (the cache holds at least the new tokens), got " + std::to_string(v));
    }
  };
  if (cache_lens) {
    if (batch) throw InputError(r.where("batch"), "cannot be combined with cache_lens (the batch is its length)");
    if (cache_lens->empty()) throw InputError(r.where("cache_lens"), "needs at least one cache length");
    if (cache_lens->size() > static_cast<size_t>(kMaxBatch)) {
      throw InputError(r.where("cache_lens"), "has more than " + std::to_string(kMaxBatch) + " sequences");
    }
    for (size_t i = 0; i < cache_lens->size(); ++i) {
      check_cache((*cache_lens)[i], r.where("cache_lens") + "[" + std::to_string(i) + "]");
    }
    shape.cache_len = *cache_lens;
  } else if (cache_len) {
    const int64_t b = batch.value_or(1);
    if (b < 1 || b > kMaxBatch) {
      throw InputError(r.where("batch"), "must be in [1, " + std::to_string(kMaxBatch) + "], got " + std::to_string(b));
    }
    check_cache(*cache_len, r.where("cache_len"));
    shape.cache_len.assign(static_cast<size_t>(b), *cache_len);
  } else {
    throw InputError(case_where,
                     "cache lengths are required for a decode case: give cache_len (+ batch) or cache_lens");
  }

  // new_tokens: one count for every sequence, or one per sequence; 1 when absent.
  const size_t batch_size = shape.cache_len.size();
  shape.new_tokens.assign(batch_size, 1);
  std::vector<std::string> where(batch_size, r.where("new_tokens"));
  if (r.has("new_tokens")) {
    const json& v = r.raw("new_tokens");
    if (v.is_array()) {
      shape.new_tokens = *r.integer_array("new_tokens");
      if (shape.new_tokens.size() != batch_size) {
        throw InputError(r.where("new_tokens"), "has " + std::to_string(shape.new_tokens.size()) +
                                                    " counts but the case has " + std::to_string(batch_size) +
                                                    " sequences");
      }
      for (size_t i = 0; i < batch_size; ++i) where[i] += "[" + std::to_string(i) + "]";
    } else if (v.is_number_integer()) {
      shape.new_tokens.assign(batch_size, *r.integer("new_tokens"));
    } else {
      json_type_error(r.where("new_tokens"), "integer or array of integers", v);
    }
  }
  for (size_t i = 0; i < batch_size; ++i) {
    const int64_t n = shape.new_tokens[i];
    if (n < 1 || n > kMaxDecodeTokens) {
      throw InputError(where[i], "must be in [1, " + std::to_string(kMaxDecodeTokens) + "], got " + std::to_string(n));
    }
    if (n > shape.cache_len[i]) {
      throw InputError(where[i], "is " + std::to_string(n) + " but sequence " + std::to_string(i) + " caches only " +
                                     std::to_string(shape.cache_len[i]) +
                                     " tokens (the new tokens are the last entries of the cache)");
    }
  }
}

void read_heads(JsonObjectReader& r, bool causal_key, AttentionShape& shape) {
  shape.hq = int_in(r, "hq", 1, kMaxHeads).value_or(8);
  shape.hk = int_in(r, "hk", 1, kMaxHeads).value_or(2);
  shape.d = int_in(r, "d", 1, kMaxHeads).value_or(128);
  if (causal_key) shape.causal = r.boolean("causal").value_or(false);
  if (const auto scale = number_at_least(r, "softmax_scale", 0.0, true)) {
    shape.softmax_scale = static_cast<float>(*scale);
  }
}

}  // namespace tilemix::config_reading
