#pragma once
// Runs the prefill kernels on one problem: uploads shape and inputs once, then each run poisons
// the outputs (every byte 0xFF, a NaN in FP16 and FP32), launches, and downloads.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/inputs/inputs.hpp"
#include "core/problem.hpp"
#include "core/routing/plan.hpp"
#include "tilemix/attention.hpp"
#include "tilemix/device_buffer.hpp"
#include "tilemix/prefill_passes.hpp"
#include "tilemix/routing.hpp"

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

// V in FP8 as quantize_values_fp8 writes it: Fp8Values' codes and scales (core/quant_fp8.hpp).
struct ValueCodes {
  std::vector<uint8_t> v8;
  std::vector<float> v_scale;
};

// Layout adaptive as the GPU builds it: the words and the values of each step
// (layouts::AdaptivePools and the scores), in the CPU builder's layouts.
struct AdaptiveOutput {
  std::vector<float> qbar, qmax, kbar, kmax, scores;
  std::vector<uint64_t> words;
};

class GpuProblem {
 public:
  GpuProblem(const AttentionShape& shape, const AttentionInputs& inputs);

  // The routed kernel with the plan's tiling and `words` (normally plan.words), after the passes
  // gpu::prefill_passes names. Outputs are poisoned before the launch and fetched after it.
  KernelOutput tilemix(const RoutingPlan& plan, const std::vector<uint64_t>& words, const Numerics& numerics);
  KernelOutput tilemix(const RoutingPlan& plan, const Numerics& numerics) {
    return tilemix(plan, plan.words, numerics);
  }
  KernelOutput flash(const Numerics& numerics);
  // The quantization pass alone (smooth_keys first with smooth_k), outputs poisoned before it.
  QuantOutput quantize(bool smooth_k = false);
  // quantize_values_fp8 alone, outputs poisoned before it.
  ValueCodes quantize_values();
  // gpu::adaptive_words on the problem's Q and K for the tiling and ratio of `plan`, downloaded;
  // scratch and words are poisoned first, so a value no thread wrote shows.
  AdaptiveOutput adaptive_routing(const RoutingPlan& plan);

  // For timing: upload the routing once, then enqueue launches (no poison, no synchronisation).
  // launch_tilemix includes every pass of gpu::prefill_passes, as every reported time does: the
  // quantization passes, and for a layout that routes from the data (adaptive) the words built on
  // the GPU from Q and K (launch_routing), which then replace `words`; the kernel's instance is
  // then chosen without reading the words (one score product per step only where every g is even).
  void set_routing(const RoutingPlan& plan, const std::vector<uint64_t>& words);
  bool routes_on_gpu() const { return adaptive_ != nullptr; }
  void launch_routing();
  void launch_tilemix(const Numerics& numerics);
  // launch_tilemix's quantization passes alone (smooth_keys, quantize_queries, quantize_keys,
  // quantize_values_fp8 as gpu::prefill_passes names them), for their share of its time; none
  // where quantizes is false.
  bool quantizes(const Numerics& numerics) const { return tilemix_passes(numerics).quantizes(); }
  void launch_quantization(const Numerics& numerics);
  void launch_flash(const Numerics& numerics);
  KernelOutput fetch();

  // Bytes resident in device memory for one call: inputs, outputs, and for tilemix the routing
  // metadata plus the scratch of its passes (gpu::prefill_passes); as allocated or as the driver
  // measured the allocations.
  int64_t resident_bytes(bool tilemix, const Numerics& numerics,
                         gpu::MemoryCount how = gpu::MemoryCount::allocated) const;

  gpu::PrefillParams params(const Numerics& numerics);
  // The mainloop of the calls that follow (PrefillParams::mainloop; automatic unless set).
  void set_mainloop(PrefillMainloop mainloop) { mainloop_ = mainloop; }
  // Whether the calls that follow pass the work tile counters (PrefillParams::work_tile_counters;
  // on unless set), the counters as the calls left them (zeros), and counters set to other
  // values (for a test: a call must then skip work tiles).
  void set_dynamic_work_tiles(bool on) { dynamic_work_tiles_ = on; }
  std::vector<uint64_t> work_tile_counters() const;
  void set_work_tile_counters(const std::vector<uint64_t>& values);

 private:
  void poison_outputs();
  void allocate_value_codes();  // v8_ and v_scale_, at the first call with pv fp8 or routed
  // The parameters of the routed calls of `passes`, with the routing set.
  gpu::PrefillParams routed_params(const gpu::PrefillPasses& passes);
  void launch_quantization_passes(const gpu::PrefillPasses& passes, const gpu::PrefillParams& p);
  // The passes a tilemix call asking for `numerics` runs with the routing set.
  gpu::PrefillPasses tilemix_passes(const Numerics& numerics) const {
    return gpu::prefill_passes(numerics, mainloop_, {any_int8_, routes_on_gpu()}, cc_);
  }

  // Layout adaptive's word builder for one plan: its schedule and scratch on the device, and the
  // parameters of gpu::adaptive_words, which writes `words`.
  struct AdaptiveBuilder {
    gpu::DeviceBuffer tile_offset, tile_sequence, tile_groups, cells, group_offset, mask_width, fp16_groups;
    gpu::DeviceBuffer qbar, qmax, kbar, kmax, scores;
    gpu::AdaptiveRoutingParams params;
  };
  std::unique_ptr<AdaptiveBuilder> make_adaptive_builder(const RoutingPlan& plan, gpu::DeviceBuffer& words) const;

  AttentionShape shape_;
  ComputeCapability cc_;  // the device's: the mainloop `automatic` resolves to depends on it
  PrefillMainloop mainloop_ = PrefillMainloop::automatic;
  int64_t max_seqlen_q_ = 0;
  gpu::DeviceBuffer q_, k_, v_, cu_q_, cu_k_, o_, lse_;
  gpu::DeviceBuffer work_tile_counters_;  // zeroed once; the calls leave it zero, so never poisoned
  bool dynamic_work_tiles_ = true;
  gpu::DeviceBuffer q8_, k8_, q_scale_, k_scale_, q_block_offset_, k_block_offset_;
  gpu::DeviceBuffer kbar_, qkbar_, kbar_partial_, k_smoothed_;
  gpu::DeviceBuffer v8_, v_scale_;  // pv fp8 / routed, allocated when first used
  gpu::DeviceBuffer words_, tile_offset_, group_;
  int64_t q_blocks_ = 0, k_blocks_ = 0;
  int64_t total_query_tiles_ = 0;
  bool any_int8_ = false;
  bool uniform_steps_ = false;  // PrefillParams::uniform_steps of the routing set
  std::unique_ptr<AdaptiveBuilder> adaptive_;  // the routing set's words builder, for adaptive
};

// FP16 bits as an ordered integer line: the distance of two values in units in the last place.
inline int half_ulp_distance(uint16_t a, uint16_t b) {
  auto line = [](uint16_t h) { return (h & 0x8000) ? -static_cast<int>(h & 0x7fff) : static_cast<int>(h); };
  const int d = line(a) - line(b);
  return d < 0 ? -d : d;
}

}  // namespace tilemix::app
