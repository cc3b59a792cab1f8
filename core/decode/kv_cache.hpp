#pragma once
// KV cache of one layer for decode (SPEC 5): per sequence, per KV head, tokens in blocks of
// BLKK = 64. The INT8 cache holds K8, V8 and one FP32 scale per (block, KV head) for K and for V;
// the FP16 cache (the baseline) holds K and V. Both share one layout:
//   tokens:  [cu_capacity.back(), hk, d], sequence b's token t at row cu_capacity[b] + t
//   scales:  [cu_blocks.back(), hk],      sequence b's block k at row cu_blocks[b] + k
// where capacity_b is a multiple of 64 and cu_* are prefix sums over sequences.
#include <cstdint>
#include <vector>

#include "core/quant.hpp"

namespace tilemix {

constexpr int kCacheBlock = kBlockK;

struct KvCacheLayout {
  int hk = 0, d = 0;
  std::vector<int64_t> capacity;     // tokens per sequence, multiple of 64
  std::vector<int64_t> cu_capacity;  // B+1 token offsets
  std::vector<int64_t> cu_blocks;    // B+1 scale-row offsets (capacity / 64)
  std::vector<int64_t> length;       // tokens held per sequence

  int batch() const { return static_cast<int>(capacity.size()); }
};

// Capacities are rounded up to whole blocks; every sequence starts empty.
KvCacheLayout make_cache_layout(int hk, int d, const std::vector<int64_t>& capacity_tokens);

struct Int8KvCache {
  KvCacheLayout layout;
  std::vector<int8_t> k8, v8;
  std::vector<float> k_scale, v_scale;
};

struct Fp16KvCache {
  KvCacheLayout layout;
  std::vector<uint16_t> k, v;  // FP16 bits
};

Int8KvCache make_int8_cache(const KvCacheLayout& layout);
Fp16KvCache make_fp16_cache(const KvCacheLayout& layout);

// Appends counts[b] new tokens to each sequence. k_new / v_new: FP16 bits [sum counts, hk, d],
// packed by prefix sums of counts. Throws InputError when a sequence would exceed its capacity.
//
// INT8 append, per (sequence, KV head, block touched): the block's tokens already held are
// dequantized (x = float(code) * old_scale, fp32), the new tokens are taken as float(FP16), the
// block's scale is recomputed from the absmax of all of them (absmax / 127) and every token of
// the block is quantized again with int8_code. A token already held therefore moves by at most
// half of the new block scale; tokens of earlier, full blocks never change. The GPU append
// kernel does exactly this, bit for bit.
void append_tokens(Int8KvCache& cache, const std::vector<int64_t>& counts, const std::vector<uint16_t>& k_new,
                   const std::vector<uint16_t>& v_new);
void append_tokens(Fp16KvCache& cache, const std::vector<int64_t>& counts, const std::vector<uint16_t>& k_new,
                   const std::vector<uint16_t>& v_new);

// Dequantized K and V of the cache's held tokens as FP32, packed [sum length, hk, d] by prefix
// sums of length (what the INT8 cache stands for; used by references and tests).
void dequantize_cache(const Int8KvCache& cache, std::vector<float>& k, std::vector<float>& v);

}  // namespace tilemix
