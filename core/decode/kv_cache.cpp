#include "core/decode/kv_cache.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "core/fp16.hpp"
#include "core/problem.hpp"
#include "core/sizes.hpp"

namespace tilemix {
namespace {

// Checks an append before anything is written, so a rejected append leaves the cache unchanged.
void check_append(const KvCacheLayout& layout, const std::vector<int64_t>& counts, const std::vector<uint16_t>& k_new,
                  const std::vector<uint16_t>& v_new) {
  if (counts.size() != layout.capacity.size()) {
    throw InputError("append_tokens.counts", "has " + std::to_string(counts.size()) + " entries but the cache holds " +
                                                 std::to_string(layout.capacity.size()) + " sequences");
  }
  int64_t total = 0;
  for (size_t b = 0; b < counts.size(); ++b) {
    const std::string where = "append_tokens.counts[" + std::to_string(b) + "]";
    if (counts[b] < 0) throw InputError(where, "negative token count " + std::to_string(counts[b]));
    if (layout.length[b] + counts[b] > layout.capacity[b]) {
      throw InputError(where, "sequence " + std::to_string(b) + " would hold " +
                                  std::to_string(layout.length[b] + counts[b]) + " tokens, capacity " +
                                  std::to_string(layout.capacity[b]));
    }
    total += counts[b];
  }
  const size_t expected = static_cast<size_t>(total) * layout.hk * layout.d;
  if (k_new.size() != expected || v_new.size() != expected) {
    throw InputError("append_tokens", "new K/V hold " + std::to_string(k_new.size()) + "/" +
                                          std::to_string(v_new.size()) + " values, expected " +
                                          std::to_string(expected) + " ([sum counts, hk, d])");
  }
}

// Re-quantizes one block of one (sequence, KV head) of a K or V cache after tokens
// [held, held + count) of the block were appended (block-relative): held codes dequantized
// with the old scale, new tokens as float(FP16), then one new scale and new codes for all.
// `codes(t)` points at block token t in the cache, `fresh(t)` at new token t.
template <typename Codes, typename Fresh>
void requantize_block(int64_t held, int64_t count, int d, float& scale, Codes codes, Fresh fresh,
                      std::vector<float>& values) {
  const int64_t tokens = held + count;
  values.resize(static_cast<size_t>(tokens) * d);
  float absmax = 0.0f;
  for (int64_t t = 0; t < tokens; ++t) {
    float* x = &values[static_cast<size_t>(t) * d];
    if (t < held) {
      const int8_t* code = codes(t);
      for (int c = 0; c < d; ++c) x[c] = static_cast<float>(code[c]) * scale;
    } else {
      const uint16_t* h = fresh(t - held);
      for (int c = 0; c < d; ++c) x[c] = half_to_float(h[c]);
    }
    for (int c = 0; c < d; ++c) absmax = std::max(absmax, std::fabs(x[c]));
  }
  scale = int8_scale(absmax);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* x = &values[static_cast<size_t>(t) * d];
    int8_t* code = codes(t);
    for (int c = 0; c < d; ++c) code[c] = int8_code(x[c], scale);
  }
}

}  // namespace

KvCacheLayout make_cache_layout(int hk, int d, const std::vector<int64_t>& capacity_tokens) {
  if (hk < 1) throw InputError("hk", "must be positive, got " + std::to_string(hk));
  if (d < 1) throw InputError("d", "must be positive, got " + std::to_string(d));
  KvCacheLayout layout;
  layout.hk = hk;
  layout.d = d;
  std::vector<int64_t> blocks(capacity_tokens.size());
  for (size_t b = 0; b < capacity_tokens.size(); ++b) {
    const std::string where = "capacity[" + std::to_string(b) + "]";
    if (capacity_tokens[b] < 0) throw InputError(where, "negative capacity " + std::to_string(capacity_tokens[b]));
    if (capacity_tokens[b] > kMaxSeqLen) {
      throw InputError(where, "capacity " + std::to_string(capacity_tokens[b]) + " is more than " +
                                  std::to_string(kMaxSeqLen) + " tokens");
    }
    blocks[b] = (capacity_tokens[b] + kCacheBlock - 1) / kCacheBlock;
    layout.capacity.push_back(blocks[b] * kCacheBlock);
  }
  layout.cu_capacity = prefix_sums(layout.capacity);
  layout.cu_blocks = prefix_sums(blocks);
  // The FP16 cache has the widest elements; the INT8 codes and the scales take fewer bytes.
  checked_product("capacity", "the FP16 cache [capacity tokens, hk, d]",
                  {{layout.cu_capacity.back(), "capacity tokens"}, {hk, "hk"}, {d, "d"}, {2, "bytes"}});
  layout.length.assign(capacity_tokens.size(), 0);
  return layout;
}

Int8KvCache make_int8_cache(const KvCacheLayout& layout) {
  Int8KvCache cache;
  cache.layout = layout;
  const size_t elements = static_cast<size_t>(layout.cu_capacity.back()) * layout.hk * layout.d;
  const size_t scales = static_cast<size_t>(layout.cu_blocks.back()) * layout.hk;
  cache.k8.assign(elements, 0);
  cache.v8.assign(elements, 0);
  cache.k_scale.assign(scales, 0.0f);
  cache.v_scale.assign(scales, 0.0f);
  return cache;
}

Fp16KvCache make_fp16_cache(const KvCacheLayout& layout) {
  Fp16KvCache cache;
  cache.layout = layout;
  const size_t elements = static_cast<size_t>(layout.cu_capacity.back()) * layout.hk * layout.d;
  cache.k.assign(elements, 0);
  cache.v.assign(elements, 0);
  return cache;
}

void append_tokens(Int8KvCache& cache, const std::vector<int64_t>& counts, const std::vector<uint16_t>& k_new,
                   const std::vector<uint16_t>& v_new) {
  KvCacheLayout& layout = cache.layout;
  check_append(layout, counts, k_new, v_new);
  const int batch = layout.batch(), hk = layout.hk, d = layout.d;
  const std::vector<int64_t> cu_new = prefix_sums(counts);
  // Each (sequence, KV head) owns its own blocks and scales, so the order of the work is free.
#pragma omp parallel
  {
    std::vector<float> values;
#pragma omp for collapse(2) schedule(dynamic)
    for (int b = 0; b < batch; ++b) {
      for (int h = 0; h < hk; ++h) {
        if (counts[b] == 0) continue;  // blocks without new tokens keep their codes and scales
        const int64_t len = layout.length[b], end = len + counts[b];
        for (int64_t blk = len / kCacheBlock; blk * kCacheBlock < end; ++blk) {
          const int64_t first = blk * kCacheBlock;
          const int64_t held = std::max<int64_t>(0, len - first);
          const int64_t count = std::min<int64_t>(end, first + kCacheBlock) - first - held;
          const int64_t new_first = cu_new[b] + first + held - len;  // packed row of the block's first new token
          const auto cache_row = [&](int64_t t) {
            return (static_cast<size_t>(layout.cu_capacity[b] + first + t) * hk + h) * d;
          };
          const auto new_row = [&](int64_t t) { return (static_cast<size_t>(new_first + t) * hk + h) * d; };
          const size_t scale = static_cast<size_t>(layout.cu_blocks[b] + blk) * hk + h;
          requantize_block(
              held, count, d, cache.k_scale[scale], [&](int64_t t) { return &cache.k8[cache_row(t)]; },
              [&](int64_t t) { return &k_new[new_row(t)]; }, values);
          requantize_block(
              held, count, d, cache.v_scale[scale], [&](int64_t t) { return &cache.v8[cache_row(t)]; },
              [&](int64_t t) { return &v_new[new_row(t)]; }, values);
        }
      }
    }
  }
  for (int b = 0; b < batch; ++b) layout.length[b] += counts[b];
}

void append_tokens(Fp16KvCache& cache, const std::vector<int64_t>& counts, const std::vector<uint16_t>& k_new,
                   const std::vector<uint16_t>& v_new) {
  KvCacheLayout& layout = cache.layout;
  check_append(layout, counts, k_new, v_new);
  const size_t row = static_cast<size_t>(layout.hk) * layout.d;
  size_t src = 0;
  for (int b = 0; b < layout.batch(); ++b) {
    const size_t dst = static_cast<size_t>(layout.cu_capacity[b] + layout.length[b]) * row;
    const size_t n = static_cast<size_t>(counts[b]) * row;
    std::copy_n(k_new.data() + src, n, cache.k.data() + dst);
    std::copy_n(v_new.data() + src, n, cache.v.data() + dst);
    src += n;
    layout.length[b] += counts[b];
  }
}

void dequantize_cache(const Int8KvCache& cache, std::vector<float>& k, std::vector<float>& v) {
  const KvCacheLayout& layout = cache.layout;
  const int batch = layout.batch(), hk = layout.hk, d = layout.d;
  const std::vector<int64_t> cu_length = prefix_sums(layout.length);
  k.assign(static_cast<size_t>(cu_length.back()) * hk * d, 0.0f);
  v.assign(k.size(), 0.0f);
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < hk; ++h) {
      for (int64_t t = 0; t < layout.length[b]; ++t) {
        const size_t scale = static_cast<size_t>(layout.cu_blocks[b] + t / kCacheBlock) * hk + h;
        const size_t src = (static_cast<size_t>(layout.cu_capacity[b] + t) * hk + h) * d;
        const size_t dst = (static_cast<size_t>(cu_length[b] + t) * hk + h) * d;
        for (int c = 0; c < d; ++c) {
          k[dst + c] = static_cast<float>(cache.k8[src + c]) * cache.k_scale[scale];
          v[dst + c] = static_cast<float>(cache.v8[src + c]) * cache.v_scale[scale];
        }
      }
    }
  }
}

}  // namespace tilemix
