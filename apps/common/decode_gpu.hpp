#pragma once
// Runs the decode kernels on one problem: both KV caches, the queries, the routing and the splits
// of the launch plan live in device memory, uploaded once; a checked run poisons the outputs
// (every byte 0xFF, a NaN in FP16 and FP32) and the split workspace, launches, and downloads.
#include <cstdint>
#include <functional>
#include <vector>

#include "core/decode/decode_case.hpp"
#include "core/decode/decode_shape.hpp"
#include "core/decode/kv_cache.hpp"
#include "core/routing/plan.hpp"
#include "kernels/decode/plan.hpp"
#include "tilemix/decode.hpp"
#include "tilemix/device_buffer.hpp"

namespace tilemix::app {

struct DecodeOutput {
  std::vector<uint16_t> o;  // FP16 bits [total_new, hq, d]
  std::vector<float> lse;   // [hq, total_new]
};

class GpuAppend;

// The INT8 and the FP16 KV cache of one layer in device memory, with the lengths they hold.
class GpuKvCaches {
 public:
  // Empty caches with the capacities (and lengths) of `layout`; codes, scales and tokens zero.
  explicit GpuKvCaches(const KvCacheLayout& layout);
  // Copies of filled caches, which must share one layout.
  GpuKvCaches(const Int8KvCache& int8, const Fp16KvCache& fp16);

  const KvCacheLayout& layout() const { return layout_; }
  gpu::DeviceKvCache view(CacheKind kind) const;
  // Device bytes of one cache (tokens, scales, offsets), as allocated or as measured.
  int64_t bytes(CacheKind kind, gpu::MemoryCount how = gpu::MemoryCount::allocated) const;
  Int8KvCache download_int8() const;
  Fp16KvCache download_fp16() const;
  // Appends to both caches, waits, and advances the lengths. `a` must have been made at the
  // lengths the caches hold now.
  void append(const GpuAppend& a);

 private:
  KvCacheLayout layout_;
  gpu::DeviceBuffer cu_capacity_, cu_blocks_;
  gpu::DeviceBuffer k8_, v8_, k_scale_, v_scale_, k_, v_;
};

// One append of counts[b] new tokens (FP16 [sum counts, hk, d] in device memory, owned by the
// caller) after the lengths the caches hold when it is made. launch() only enqueues and may be
// repeated with the same lengths (the bench times it); GpuKvCaches::append applies it once. It
// keeps device pointers: moving the caches (into a DecodeGpu) leaves it valid.
class GpuAppend {
 public:
  GpuAppend(const GpuKvCaches& caches, const std::vector<int64_t>& counts, const void* k_new, const void* v_new);

  void launch(CacheKind kind) const;

 private:
  friend class GpuKvCaches;
  gpu::KvAppendParams params(CacheKind kind) const;

  gpu::DeviceKvCache int8_, fp16_;
  std::vector<int64_t> counts_, old_length_;
  gpu::DeviceBuffer cu_new_, old_length_device_, touched_offset_;
  int64_t total_touched_ = 0;
  const void* k_new_;
  const void* v_new_;
};

class DecodeGpu {
 public:
  // `caches` hold shape.cache_len tokens per sequence (validated shape, q FP16 [total_new, hq, d]);
  // `launch` is plan_decode_launch's plan for this shape.
  DecodeGpu(const DecodeShape& shape, const std::vector<uint16_t>& q, GpuKvCaches caches,
            const DecodeLaunchPlan& launch);
  // The prepared problem as it is, with its routing plan's words.
  DecodeGpu(const PreparedDecode& pd, const DecodeLaunchPlan& launch);

  // Routing of the INT8 cache: `plan` built for shape.attention_shape() with kDecodeGeometry. Also
  // sets what the words hold (decode_routes), which picks the wgmma kernel's instance.
  void set_routing(const RoutingPlan& plan, const std::vector<uint64_t>& words);
  DecodeRoutes routes() const { return routes_; }
  // Overrides what the calls claim the words hold: `mixed` runs the instance with both routes
  // whatever the words are (a claim the words contradict makes the kernel trap).
  void set_routes(DecodeRoutes routes) { routes_ = routes; }
  // Poisons outputs and workspace, launches the launch plan over its cache, waits and downloads.
  DecodeOutput run();
  // For timing: enqueue only.
  void launch();
  DecodeOutput fetch();

  GpuKvCaches& caches() { return caches_; }
  const DecodeShape& shape() const { return shape_; }
  // What the calls launch, as they launch it (the bench reports it).
  const DecodeLaunchPlan& launch_plan() const { return launch_; }
  // Replaces the launch plan (same shape; either cache); the workspace grows when the new plan
  // needs more.
  void set_launch_plan(const DecodeLaunchPlan& launch);
  // The per-sequence arrival counts of the split combine as they are now (zero between calls).
  std::vector<unsigned> arrival_counts() const;
  // Per-CTA timestamps of the decode kernel (a row of gpu::DecodeTimelineSlot values per CTA, in
  // launch order): `launch` enqueues one call (e.g. through the bench's timing, for its L2 flush)
  // while the timeline is on.
  std::vector<std::vector<uint64_t>> timeline(const std::function<void()>& launch);
  // Device bytes one call of `kind` keeps resident: its cache, queries, outputs, workspace and
  // the plan arrays (routing for INT8).
  int64_t resident_bytes(CacheKind kind, gpu::MemoryCount how = gpu::MemoryCount::allocated) const;
  // Bytes one call must move: the cache tokens held (and INT8 block scales), the queries, O and
  // LSE. The split workspace and the plan arrays are not counted.
  int64_t bytes_moved(CacheKind kind) const;

 private:
  gpu::DecodeParams params() const;

  DecodeShape shape_;
  DecodeLaunchPlan launch_;
  GpuKvCaches caches_;
  gpu::DeviceBuffer q_, o_, lse_, cu_new_, cache_len_, split_offset_, split_first_tile_, workspace_;
  gpu::DeviceBuffer arrivals_;  // zeroed once; the calls leave it zero, so never poisoned
  gpu::DeviceBuffer words_, group_;
  uint64_t* timeline_ = nullptr;  // set only inside timeline()
  bool routed_ = false;
  DecodeRoutes routes_ = DecodeRoutes::mixed;
};

}  // namespace tilemix::app
