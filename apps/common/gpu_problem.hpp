#pragma once
// Runs the prefill kernels on one problem: uploads shape and inputs once, then each run poisons
// the outputs (every byte 0xFF, a NaN in FP16 and FP32), launches, and downloads.
#include <cstdint>
#include <vector>

#include "core/inputs/inputs.hpp"
#include "core/problem.hpp"
#include "core/routing/plan.hpp"
#include "tilemix/attention.hpp"
#include "tilemix/device_buffer.hpp"

namespace tilemix::app {

struct KernelOutput {
  std::vector<uint16_t> o;  // FP16 bits [total_q, hq, d]
  std::vector<float> lse;   // [hq, total_q]
};

struct QuantOutput {
  std::vector<int8_t> q8, k8;  // with smooth_k, k8 and k_scale are those of Ks
  std::vector<float> q_scale, k_scale;
  // smooth_k only: [batch, hk, d], [total_q, hq], and Ks (FP16 bits [total_k, hk, d]).
  std::vector<float> kbar, qkbar;
  std::vector<uint16_t> ks;
};

class GpuProblem {
 public:
  GpuProblem(const AttentionShape& shape, const AttentionInputs& inputs);

  // The routed kernel with the plan's tiling and `words` (normally plan.words). quantize_once runs
  // quantize_qk first when some word routes a group to INT8, as a caller must, and smooth_k
  // smooth_keys before both. Outputs are poisoned before the launch and fetched after it.
  KernelOutput tilemix(const RoutingPlan& plan, const std::vector<uint64_t>& words, const Numerics& numerics);
  KernelOutput tilemix(const RoutingPlan& plan, const Numerics& numerics) {
    return tilemix(plan, plan.words, numerics);
  }
  KernelOutput flash(const Numerics& numerics);
  // The quantization pass alone (smooth_keys first with smooth_k), outputs poisoned before it.
  QuantOutput quantize(bool smooth_k = false);

  // For timing: upload the routing once, then enqueue launches (no poison, no synchronisation).
  // launch_tilemix includes the quantization pass (and smooth_keys with smooth_k), as every
  // reported time does.
  void set_routing(const RoutingPlan& plan, const std::vector<uint64_t>& words);
  void launch_tilemix(const Numerics& numerics);
  void launch_flash(const Numerics& numerics);
  KernelOutput fetch();

  // Bytes resident in device memory for one call: inputs, outputs, and for tilemix the routing
  // metadata plus (quantize_once with an INT8 tile) the Q8/K8 codes and scales and (smooth_k) Ks,
  // kbar, its block sums and qkbar; as allocated or as the driver measured the allocations.
  int64_t resident_bytes(bool tilemix, const Numerics& numerics,
                         gpu::MemoryCount how = gpu::MemoryCount::allocated) const;

  gpu::PrefillParams params(const Numerics& numerics);
  // The mainloop of the calls that follow (PrefillParams::mainloop; automatic unless set).
  void set_mainloop(PrefillMainloop mainloop) { mainloop_ = mainloop; }

 private:
  void poison_outputs();

  AttentionShape shape_;
  PrefillMainloop mainloop_ = PrefillMainloop::automatic;
  int64_t max_seqlen_q_ = 0;
  gpu::DeviceBuffer q_, k_, v_, cu_q_, cu_k_, o_, lse_;
  gpu::DeviceBuffer q8_, k8_, q_scale_, k_scale_, q_block_offset_, k_block_offset_;
  gpu::DeviceBuffer kbar_, qkbar_, kbar_partial_, k_smoothed_;
  gpu::DeviceBuffer words_, tile_offset_, group_;
  int64_t q_blocks_ = 0, k_blocks_ = 0;
  int64_t total_query_tiles_ = 0;
  bool any_int8_ = false;
  bool even_route_groups_ = false;  // PrefillParams::even_route_groups of the routing set
};

// FP16 bits as an ordered integer line: the distance of two values in units in the last place.
inline int half_ulp_distance(uint16_t a, uint16_t b) {
  auto line = [](uint16_t h) { return (h & 0x8000) ? -static_cast<int>(h & 0x7fff) : static_cast<int>(h); };
  const int d = line(a) - line(b);
  return d < 0 ? -d : d;
}

}  // namespace tilemix::app
