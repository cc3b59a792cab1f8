#include "apps/common/gpu_problem.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/quant.hpp"
#include "core/quant_fp8.hpp"
#include "core/routing/layouts/adaptive.hpp"
#include "tilemix/gpu.hpp"
#include "tilemix/routing.hpp"

namespace tilemix::app {

GpuProblem::GpuProblem(const AttentionShape& shape, const AttentionInputs& inputs)
    : shape_(shape),
      cc_(gpu::current_compute_capability()),
      q_(gpu::to_device(inputs.q)),
      k_(gpu::to_device(inputs.k)),
      v_(gpu::to_device(inputs.v)),
      cu_q_(gpu::to_device(shape.cu_seqlens_q)),
      cu_k_(gpu::to_device(shape.cu_seqlens_k)),
      o_(inputs.q.size() * sizeof(uint16_t)),
      lse_(static_cast<size_t>(shape.total_q()) * shape.hq * sizeof(float)),
      work_tile_counters_(gpu::kPrefillWorkTileCounters * sizeof(uint64_t), "prefill work tile counters") {
  work_tile_counters_.fill(0);
  for (int b = 0; b < shape.batch(); ++b) max_seqlen_q_ = std::max(max_seqlen_q_, shape.seqlen_q(b));
  const std::vector<int64_t> q_off = scale_block_offsets(shape.cu_seqlens_q, kBlockQ);
  const std::vector<int64_t> k_off = scale_block_offsets(shape.cu_seqlens_k, kBlockK);
  q_blocks_ = q_off.back();
  k_blocks_ = k_off.back();
  q_block_offset_ = gpu::to_device(q_off);
  k_block_offset_ = gpu::to_device(k_off);
  q8_ = gpu::DeviceBuffer(inputs.q.size());
  k8_ = gpu::DeviceBuffer(inputs.k.size());
  q_scale_ = gpu::DeviceBuffer(static_cast<size_t>(q_blocks_) * shape.hq * sizeof(float));
  k_scale_ = gpu::DeviceBuffer(static_cast<size_t>(k_blocks_) * shape.hk * sizeof(float));
  const size_t channels = static_cast<size_t>(shape.hk) * shape.d;
  kbar_ = gpu::DeviceBuffer(static_cast<size_t>(shape.batch()) * channels * sizeof(float));
  qkbar_ = gpu::DeviceBuffer(static_cast<size_t>(shape.total_q()) * shape.hq * sizeof(float));
  kbar_partial_ = gpu::DeviceBuffer(static_cast<size_t>(k_blocks_) * channels * sizeof(float));
  k_smoothed_ = gpu::DeviceBuffer(inputs.k.size() * sizeof(uint16_t));
}

gpu::PrefillParams GpuProblem::params(const Numerics& numerics) {
  gpu::PrefillParams p;
  p.q = q_.data();
  p.k = k_.data();
  p.v = v_.data();
  p.o = o_.data();
  p.lse = lse_.as<float>();
  p.cu_seqlens_q = cu_q_.as<const int64_t>();
  p.cu_seqlens_k = cu_k_.as<const int64_t>();
  p.batch = shape_.batch();
  p.max_seqlen_q = max_seqlen_q_;
  p.total_q = shape_.total_q();
  p.total_k = shape_.total_k();
  p.hq = shape_.hq;
  p.hk = shape_.hk;
  p.d = shape_.d;
  p.causal = shape_.causal;
  p.softmax_scale = shape_.softmax_scale;
  p.mainloop = mainloop_;
  if (dynamic_work_tiles_) p.work_tile_counters = work_tile_counters_.as<uint64_t>();
  p.q8 = q8_.as<int8_t>();
  p.k8 = k8_.as<int8_t>();
  p.q_scale = q_scale_.as<float>();
  p.k_scale = k_scale_.as<float>();
  p.q_block_offset = q_block_offset_.as<const int64_t>();
  p.k_block_offset = k_block_offset_.as<const int64_t>();
  p.q_blocks = q_blocks_;
  p.k_blocks = k_blocks_;
  p.kbar = kbar_.as<float>();
  p.qkbar = qkbar_.as<float>();
  p.kbar_partial = kbar_partial_.as<float>();
  p.k_smoothed = k_smoothed_.data();
  if (numerics.pv != PvPrecision::fp16) {
    allocate_value_codes();
    p.v8 = v8_.as<uint8_t>();
    p.v_scale = v_scale_.as<float>();
  }
  p.numerics = numerics;
  return p;
}

void GpuProblem::allocate_value_codes() {
  if (v8_.bytes() != 0 || k_blocks_ == 0) return;
  const size_t channels = static_cast<size_t>(shape_.hk) * shape_.d;
  v8_ = gpu::DeviceBuffer(channels * static_cast<size_t>(k_blocks_) * kBlockV);
  v_scale_ = gpu::DeviceBuffer(channels * static_cast<size_t>(k_blocks_) * sizeof(float));
}

std::vector<uint64_t> GpuProblem::work_tile_counters() const {
  return gpu::to_host<uint64_t>(work_tile_counters_, gpu::kPrefillWorkTileCounters);
}

void GpuProblem::set_work_tile_counters(const std::vector<uint64_t>& values) {
  if (values.size() != static_cast<size_t>(gpu::kPrefillWorkTileCounters)) {
    throw std::invalid_argument("work tile counters: " + std::to_string(gpu::kPrefillWorkTileCounters) +
                                " values expected, got " + std::to_string(values.size()));
  }
  work_tile_counters_ = gpu::to_device(values);
}

KernelOutput GpuProblem::fetch() {
  gpu::device_synchronize("prefill run");
  KernelOutput out;
  out.o = gpu::to_host<uint16_t>(o_, o_.bytes() / sizeof(uint16_t));
  out.lse = gpu::to_host<float>(lse_, lse_.bytes() / sizeof(float));
  return out;
}

void GpuProblem::set_routing(const RoutingPlan& plan, const std::vector<uint64_t>& words) {
  words_ = gpu::to_device(words);
  tile_offset_ = gpu::to_device(plan.tile_offset);
  const std::vector<int> groups = plan.groups();
  group_ = gpu::to_device(groups);
  total_query_tiles_ = plan.total_tiles();
  const int tiles_per_step = gpu::prefill_emulation(PrefillMainloop::warp_specialized).softmax_tiles;
  if (routes_from_data(plan.request.layout)) {
    // The words come from the GPU at every launch: nothing about them is read here, so a step
    // takes one route only where it cannot straddle two groups.
    adaptive_ = make_adaptive_builder(plan, words_);
    any_int8_ = plan.request.ratio > 0.0;
    uniform_steps_ = std::all_of(groups.begin(), groups.end(), [&](int g) { return g % tiles_per_step == 0; });
  } else {
    adaptive_.reset();
    any_int8_ = gpu::any_int8_route(words);
    uniform_steps_ = uniform_steps(plan, words, tiles_per_step);
  }
}

void GpuProblem::launch_routing() {
  if (adaptive_) gpu::adaptive_words(adaptive_->params, nullptr);
}

gpu::PrefillParams GpuProblem::routed_params(const gpu::PrefillPasses& passes) {
  gpu::PrefillParams p = params(passes.numerics);
  p.mainloop = passes.mainloop;
  p.words = words_.as<const uint64_t>();
  p.tile_offset = tile_offset_.as<const int64_t>();
  p.group = group_.as<const int>();
  p.total_query_tiles = total_query_tiles_;
  p.uniform_steps = uniform_steps_;
  return p;
}

void GpuProblem::launch_quantization_passes(const gpu::PrefillPasses& passes, const gpu::PrefillParams& p) {
  if (passes.smooth_keys) gpu::smooth_keys(p, nullptr);
  if (passes.quantize_queries) gpu::quantize_queries(p, nullptr);
  if (passes.quantize_keys) gpu::quantize_keys(p, nullptr);
  if (passes.quantize_values_fp8) gpu::quantize_values_fp8(p, nullptr);
}

void GpuProblem::launch_tilemix(const Numerics& numerics) {
  const gpu::PrefillPasses passes = tilemix_passes(numerics);
  const gpu::PrefillParams p = routed_params(passes);
  if (passes.adaptive_words) launch_routing();
  launch_quantization_passes(passes, p);
  gpu::tilemix_prefill(p, nullptr);
}

void GpuProblem::launch_quantization(const Numerics& numerics) {
  const gpu::PrefillPasses passes = tilemix_passes(numerics);
  launch_quantization_passes(passes, routed_params(passes));
}

void GpuProblem::launch_flash(const Numerics& numerics) { gpu::flash_fp16_prefill(params(numerics), nullptr); }

void GpuProblem::poison_outputs() {
  o_.poison();
  lse_.poison();
  for (gpu::DeviceBuffer* b :
       {&q8_, &k8_, &q_scale_, &k_scale_, &kbar_, &qkbar_, &kbar_partial_, &k_smoothed_, &v8_, &v_scale_}) {
    b->poison();
  }
}

KernelOutput GpuProblem::tilemix(const RoutingPlan& plan, const std::vector<uint64_t>& words,
                                 const Numerics& numerics) {
  set_routing(plan, words);
  poison_outputs();
  launch_tilemix(numerics);
  return fetch();
}

KernelOutput GpuProblem::flash(const Numerics& numerics) {
  poison_outputs();
  launch_flash(numerics);
  return fetch();
}

int64_t GpuProblem::resident_bytes(bool tilemix, const Numerics& numerics, gpu::MemoryCount how) const {
  int64_t bytes = 0;
  const auto add = [&](std::initializer_list<const gpu::DeviceBuffer*> buffers) {
    for (const gpu::DeviceBuffer* b : buffers) bytes += static_cast<int64_t>(b->count(how));
  };
  add({&q_, &k_, &v_, &o_, &lse_, &cu_q_, &cu_k_, &work_tile_counters_});
  if (!tilemix) return bytes;
  add({&words_, &tile_offset_, &group_});
  const gpu::PrefillPasses passes = tilemix_passes(numerics);
  if (passes.quantize_queries) add({&q8_, &q_scale_, &q_block_offset_});
  if (passes.quantize_keys) add({&k8_, &k_scale_});
  if (passes.smooth_keys) add({&k_smoothed_, &kbar_, &qkbar_, &kbar_partial_});
  if (passes.quantize_values_fp8) add({&v8_, &v_scale_});
  if (passes.k_block_offsets()) add({&k_block_offset_});
  return bytes;
}

QuantOutput GpuProblem::quantize(bool smooth_k) {
  poison_outputs();
  Numerics numerics;
  numerics.smooth_k = smooth_k;
  const gpu::PrefillParams p = params(numerics);
  if (smooth_k) gpu::smooth_keys(p, nullptr);
  gpu::quantize_queries(p, nullptr);
  gpu::quantize_keys(p, nullptr);
  gpu::device_synchronize("quantize_queries and quantize_keys run");
  QuantOutput out;
  out.q8 = gpu::to_host<int8_t>(q8_, q8_.bytes());
  out.k8 = gpu::to_host<int8_t>(k8_, k8_.bytes());
  out.q_scale = gpu::to_host<float>(q_scale_, q_scale_.bytes() / sizeof(float));
  out.k_scale = gpu::to_host<float>(k_scale_, k_scale_.bytes() / sizeof(float));
  if (smooth_k) {
    out.kbar = gpu::to_host<float>(kbar_, kbar_.bytes() / sizeof(float));
    out.qkbar = gpu::to_host<float>(qkbar_, qkbar_.bytes() / sizeof(float));
    out.ks = gpu::to_host<uint16_t>(k_smoothed_, k_smoothed_.bytes() / sizeof(uint16_t));
  }
  return out;
}

ValueCodes GpuProblem::quantize_values() {
  Numerics numerics;
  numerics.pv = PvPrecision::fp8;
  const gpu::PrefillParams p = params(numerics);
  v8_.poison();
  v_scale_.poison();
  gpu::quantize_values_fp8(p, nullptr);
  gpu::device_synchronize("quantize_values_fp8 run");
  return {gpu::to_host<uint8_t>(v8_, v8_.bytes()), gpu::to_host<float>(v_scale_, v_scale_.bytes() / sizeof(float))};
}

std::unique_ptr<GpuProblem::AdaptiveBuilder> GpuProblem::make_adaptive_builder(const RoutingPlan& plan,
                                                                               gpu::DeviceBuffer& words) const {
  const layouts::AdaptiveSchedule schedule =
      layouts::adaptive_schedule(plan.tilings, plan.tile_offset, plan.request.ratio);
  const size_t hk = static_cast<size_t>(shape_.hk), d = static_cast<size_t>(shape_.d);
  const auto tiles = static_cast<size_t>(schedule.total_tiles());
  const auto groups = static_cast<size_t>(schedule.total_groups());
  auto b = std::make_unique<AdaptiveBuilder>();
  b->tile_offset = gpu::to_device(schedule.tile_offset);
  b->tile_sequence = gpu::to_device(schedule.tile_sequence);
  b->tile_groups = gpu::to_device(schedule.tile_groups);
  b->cells = gpu::to_device(schedule.cells);
  b->group_offset = gpu::to_device(schedule.group_offset);
  b->mask_width = gpu::to_device(schedule.mask_width);
  b->fp16_groups = gpu::to_device(schedule.fp16_groups);
  b->qbar = gpu::DeviceBuffer(hk * tiles * d * sizeof(float));
  b->qmax = gpu::DeviceBuffer(hk * tiles * sizeof(float));
  b->kbar = gpu::DeviceBuffer(hk * groups * d * sizeof(float));
  b->kmax = gpu::DeviceBuffer(hk * groups * sizeof(float));
  b->scores = gpu::DeviceBuffer(hk * tiles * kMaxGroups * sizeof(float));

  gpu::AdaptiveRoutingParams& p = b->params;
  p.q = q_.data();
  p.k = k_.data();
  p.cu_seqlens_q = cu_q_.as<const int64_t>();
  p.cu_seqlens_k = cu_k_.as<const int64_t>();
  p.batch = shape_.batch();
  p.hq = shape_.hq;
  p.hk = shape_.hk;
  p.d = shape_.d;
  p.softmax_scale = shape_.softmax_scale;
  p.block_m = schedule.block_m;
  p.tile_offset = b->tile_offset.as<const int64_t>();
  p.tile_sequence = b->tile_sequence.as<const int>();
  p.tile_groups = b->tile_groups.as<const int>();
  p.cells = b->cells.as<const float>();
  p.group_offset = b->group_offset.as<const int64_t>();
  p.mask_width = b->mask_width.as<const int64_t>();
  p.fp16_groups = b->fp16_groups.as<const int64_t>();
  p.total_tiles = schedule.total_tiles();
  p.total_groups = schedule.total_groups();
  p.qbar = b->qbar.as<float>();
  p.qmax = b->qmax.as<float>();
  p.kbar = b->kbar.as<float>();
  p.kmax = b->kmax.as<float>();
  p.scores = b->scores.as<float>();
  p.words = words.as<uint64_t>();
  return b;
}

AdaptiveOutput GpuProblem::adaptive_routing(const RoutingPlan& plan) {
  const size_t hk = static_cast<size_t>(shape_.hk), d = static_cast<size_t>(shape_.d);
  const auto tiles = static_cast<size_t>(plan.total_tiles());
  gpu::DeviceBuffer words(hk * tiles * sizeof(uint64_t));
  const std::unique_ptr<AdaptiveBuilder> b = make_adaptive_builder(plan, words);
  for (gpu::DeviceBuffer* s : {&b->qbar, &b->qmax, &b->kbar, &b->kmax, &b->scores, &words}) s->poison();
  gpu::adaptive_words(b->params, nullptr);
  gpu::device_synchronize("adaptive_words run");
  const auto groups = static_cast<size_t>(b->params.total_groups);
  AdaptiveOutput out;
  out.qbar = gpu::to_host<float>(b->qbar, hk * tiles * d);
  out.qmax = gpu::to_host<float>(b->qmax, hk * tiles);
  out.kbar = gpu::to_host<float>(b->kbar, hk * groups * d);
  out.kmax = gpu::to_host<float>(b->kmax, hk * groups);
  out.scores = gpu::to_host<float>(b->scores, hk * tiles * kMaxGroups);
  out.words = gpu::to_host<uint64_t>(words, hk * tiles);
  return out;
}

}  // namespace tilemix::app
