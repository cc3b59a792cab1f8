#pragma once
// Plain C++ API of the decode kernels (no CUDA types): appending new tokens to a KV cache, and
// split-K decode attention over the INT8 cache (routed score paths) or over the FP16 cache (the
// baseline). Layouts are those of core/decode/kv_cache.hpp and core/decode/decode_shape.hpp;
// numerics those of reference/decode_emulator.hpp; a call launches the plan that
// kernels/decode/plan.hpp resolves for it (plan_decode_launch: mainloop, CTAs, splits, combine).
// Pointers are device pointers; `stream` is a cudaStream_t passed as void* (nullptr = default
// stream). Unsupported values throw std::invalid_argument naming the value; CUDA failures throw
// CudaError (a std::runtime_error) naming the call and the shape.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/choices/decode.hpp"
#include "core/decode/decode_shape.hpp"
#include "core/quant.hpp"
#include "kernels/decode/config.hpp"
#include "kernels/decode/plan.hpp"

namespace tilemix::gpu {

// A KV cache of one layer in device memory. Sequence b's token t is row cu_capacity[b] + t of
// [cu_capacity[batch], hk, d]; its block k is scale row cu_blocks[b] + k of [cu_blocks[batch], hk].
// An INT8 cache sets k8, v8, k_scale, v_scale; an FP16 cache sets k and v.
struct DeviceKvCache {
  int batch = 0, hk = 0, d = 0;
  const int64_t* cu_capacity = nullptr;  // [batch + 1], capacities are multiples of 64 tokens
  const int64_t* cu_blocks = nullptr;    // [batch + 1]
  int8_t* k8 = nullptr;
  int8_t* v8 = nullptr;
  float* k_scale = nullptr;
  float* v_scale = nullptr;
  void* k = nullptr;  // FP16
  void* v = nullptr;

  bool is_int8() const { return k8 != nullptr; }
};

// One append: counts[b] new tokens after the old_length[b] tokens sequence b holds.
struct KvAppendParams {
  DeviceKvCache cache;
  const void* k_new = nullptr;  // FP16 [cu_new[batch], hk, d], packed by cu_new
  const void* v_new = nullptr;
  const int64_t* cu_new = nullptr;          // [batch + 1] prefix sums of counts
  const int64_t* old_length = nullptr;      // [batch]
  const int64_t* touched_offset = nullptr;  // [batch + 1], from append_touched_offsets
  int64_t total_touched = 0;                // touched_offset[batch]
};

// Prefix sums of the cache blocks each sequence's append touches (the grid of kv_append). Throws
// std::invalid_argument when a sequence would exceed its capacity or a count is negative.
inline std::vector<int64_t> append_touched_offsets(const std::vector<int64_t>& capacity,
                                                   const std::vector<int64_t>& old_length,
                                                   const std::vector<int64_t>& counts) {
  if (capacity.size() != old_length.size() || counts.size() != old_length.size()) {
    throw std::invalid_argument("append_touched_offsets: capacity, old_length and counts differ in length");
  }
  std::vector<int64_t> offsets{0};
  for (size_t b = 0; b < counts.size(); ++b) {
    const int64_t old = old_length[b], n = counts[b];
    if (n < 0 || old < 0 || old + n > capacity[b]) {
      throw std::invalid_argument("append_touched_offsets: sequence " + std::to_string(b) + " would hold " +
                                  std::to_string(old + n) + " tokens, capacity " + std::to_string(capacity[b]) +
                                  " (count " + std::to_string(n) + ")");
    }
    const int64_t blocks = n == 0 ? 0 : (old + n - 1) / kBlockK - old / kBlockK + 1;
    offsets.push_back(offsets.back() + blocks);
  }
  return offsets;
}

// Appends to the INT8 cache (re-quantizing every touched block exactly as append_tokens does,
// bit for bit) or to the FP16 cache (a copy), whichever p.cache is.
void kv_append(const KvAppendParams& p, void* stream);

struct DecodeParams {
  const void* q = nullptr;             // FP16 [total_new, hq, d]
  void* o = nullptr;                   // FP16 [total_new, hq, d]
  float* lse = nullptr;                // optional FP32 [hq, total_new]
  const int64_t* cu_new = nullptr;     // [batch + 1] prefix sums of new tokens n_b (1..16)
  const int64_t* cache_len = nullptr;  // [batch] L_b: tokens held, the new tokens' K/V last
  DeviceKvCache cache;
  int batch = 0, hq = 0, hk = 0, d = 0;
  int64_t total_new = 0;
  int max_new_tokens = 0;      // max n_b: sizes the query tile of a CTA
  float softmax_scale = 0.0f;  // resolved (validate_decode)
  // Routing (decode_int8): the words of the decode plan, [hk][batch] (one query tile per
  // sequence), and g per sequence. Key tile n of sequence b is INT8 when bit n / g is set.
  const uint64_t* words = nullptr;
  const int* group = nullptr;
  // What the words hold (decode_routes on the host's copy): all_int8 and all_fp16 select a wgmma
  // instance with that route's tile step only, whose CTAs trap on a tile of the other route.
  DecodeRoutes routes = DecodeRoutes::mixed;
  // The launch plan of this call (plan_decode_launch for its shape and cache, on this GPU), which
  // the call launches as it is: mainloop, head chunks, splits, combine.
  const DecodeLaunchPlan* plan = nullptr;
  // Its splits on the device: split_offset [batch + 1], the prefix sums of the splits per
  // sequence, and split_first_tile [total_splits], the first key tile of each split in its
  // sequence (DecodeSplitPlan::first_tiles); a split ends where the next one of its sequence
  // begins, the last at the sequence's end.
  const int64_t* split_offset = nullptr;
  const int* split_first_tile = nullptr;
  // decode_workspace_bytes(*plan) bytes; may be null when that is 0.
  void* workspace = nullptr;
  // decode_arrival_bytes(batch) bytes, zero before the first call (a call with more than one split
  // per sequence leaves them zero again; unlike the workspace they must not be overwritten
  // between calls); may be null when the workspace is. Calls that share them run one at a time.
  unsigned* arrivals = nullptr;
  // Optional per-CTA timestamps of the decode kernel (not the combine): decode_timeline_bytes(*plan)
  // bytes, a row of kDecodeTimelineSlots per CTA in launch order (DecodeTimelineSlot). Null: none.
  uint64_t* timeline = nullptr;
};

// Scratch for the partial states of sequences with more than one split: (m, l) and O in fp32 per
// (split, query head, new token). 0 when every sequence has one split (no cuts): those CTAs write
// O directly.
inline size_t decode_workspace_bytes(const DecodeLaunchPlan& plan) {
  if (!plan.splits.has_cuts()) return 0;
  return static_cast<size_t>(plan.splits.total_splits()) * plan.hq * kMaxDecodeTokens * (2 + plan.d) * sizeof(float);
}

// A row of the decode timeline (DecodeParams::timeline): the SM the CTA ran on; %globaltimer (ns)
// at its start, before its first tile, after its last tile and at its end; its key tiles and how
// many of them took the FP16 score path (all of them over the FP16 cache); its sequence, split
// and KV head.
enum DecodeTimelineSlot : int {
  kTimelineSm,
  kTimelineStart,
  kTimelineLoopStart,
  kTimelineLoopEnd,
  kTimelineEnd,
  kTimelineTiles,
  kTimelineFp16Tiles,
  kTimelineSequence,
  kTimelineSplit,
  kTimelineKvHead,
  kDecodeTimelineSlots
};
inline size_t decode_timeline_bytes(const DecodeLaunchPlan& plan) {
  return static_cast<size_t>(plan.ctas) * kDecodeTimelineSlots * sizeof(uint64_t);
}

// Counters per sequence with which the combine of the split partial states waits for exactly the
// decode CTAs of its own sequence (kernels/decode/combine.cu).
inline size_t decode_arrival_bytes(int batch) {
  return 2 * static_cast<size_t>(batch) * kDecodeArrivalStride * sizeof(unsigned);
}

// Decode over the INT8 cache (K8/V8 and block scales): per key tile the route picks the INT8
// score path (Q quantized on chip per (sequence, head)) or FP16 scores on K8 converted on chip;
// V8 is converted on chip with its block scale folded into P. Then the combine of the splits.
void decode_int8(const DecodeParams& p, void* stream);
// The same kernel shape over the FP16 cache, no routing.
void decode_fp16(const DecodeParams& p, void* stream);

// Seeded pseudo-random FP16 values, approximately N(0, stddev^2), written on the device: bench
// caches of many GiB are filled without generating them on the host.
void fill_random_fp16(void* x, int64_t count, uint64_t seed, float stddev, void* stream);

}  // namespace tilemix::gpu
