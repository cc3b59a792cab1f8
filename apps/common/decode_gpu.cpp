#include "apps/common/decode_gpu.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/problem.hpp"

namespace tilemix::app {
namespace {

size_t token_elements(const KvCacheLayout& layout) {
  return static_cast<size_t>(layout.cu_capacity.back()) * layout.hk * layout.d;
}

size_t scale_elements(const KvCacheLayout& layout) {
  return static_cast<size_t>(layout.cu_blocks.back()) * layout.hk;
}

gpu::DeviceBuffer zeroed(size_t bytes, const std::string& what) {
  gpu::DeviceBuffer b(bytes, what);
  b.fill(0);
  return b;
}

}  // namespace

GpuKvCaches::GpuKvCaches(const KvCacheLayout& layout)
    : layout_(layout),
      cu_capacity_(gpu::to_device(layout.cu_capacity)),
      cu_blocks_(gpu::to_device(layout.cu_blocks)),
      k8_(zeroed(token_elements(layout), "INT8 cache K8")),
      v8_(zeroed(token_elements(layout), "INT8 cache V8")),
      k_scale_(zeroed(scale_elements(layout) * sizeof(float), "INT8 cache K scales")),
      v_scale_(zeroed(scale_elements(layout) * sizeof(float), "INT8 cache V scales")),
      k_(zeroed(token_elements(layout) * sizeof(uint16_t), "FP16 cache K")),
      v_(zeroed(token_elements(layout) * sizeof(uint16_t), "FP16 cache V")) {}

GpuKvCaches::GpuKvCaches(const Int8KvCache& int8, const Fp16KvCache& fp16)
    : layout_(int8.layout),
      cu_capacity_(gpu::to_device(int8.layout.cu_capacity)),
      cu_blocks_(gpu::to_device(int8.layout.cu_blocks)),
      k8_(gpu::to_device(int8.k8, "INT8 cache K8")),
      v8_(gpu::to_device(int8.v8, "INT8 cache V8")),
      k_scale_(gpu::to_device(int8.k_scale, "INT8 cache K scales")),
      v_scale_(gpu::to_device(int8.v_scale, "INT8 cache V scales")),
      k_(gpu::to_device(fp16.k, "FP16 cache K")),
      v_(gpu::to_device(fp16.v, "FP16 cache V")) {
  const KvCacheLayout& a = int8.layout;
  const KvCacheLayout& b = fp16.layout;
  if (a.hk != b.hk || a.d != b.d || a.capacity != b.capacity || a.length != b.length) {
    throw std::invalid_argument("GpuKvCaches: the INT8 and FP16 caches have different layouts or lengths");
  }
}

gpu::DeviceKvCache GpuKvCaches::view(CacheKind kind) const {
  gpu::DeviceKvCache c;
  c.batch = layout_.batch();
  c.hk = layout_.hk;
  c.d = layout_.d;
  c.cu_capacity = cu_capacity_.as<const int64_t>();
  c.cu_blocks = cu_blocks_.as<const int64_t>();
  if (kind == CacheKind::int8) {
    c.k8 = k8_.as<int8_t>();
    c.v8 = v8_.as<int8_t>();
    c.k_scale = k_scale_.as<float>();
    c.v_scale = v_scale_.as<float>();
  } else {
    c.k = k_.data();
    c.v = v_.data();
  }
  return c;
}

int64_t GpuKvCaches::bytes(CacheKind kind, gpu::MemoryCount how) const {
  size_t bytes = cu_capacity_.count(how) + cu_blocks_.count(how);
  if (kind == CacheKind::int8) {
    for (const gpu::DeviceBuffer* b : {&k8_, &v8_, &k_scale_, &v_scale_}) bytes += b->count(how);
  } else {
    bytes += k_.count(how) + v_.count(how);
  }
  return static_cast<int64_t>(bytes);
}

Int8KvCache GpuKvCaches::download_int8() const {
  gpu::device_synchronize("INT8 cache download");
  Int8KvCache c;
  c.layout = layout_;
  c.k8 = gpu::to_host<int8_t>(k8_, k8_.bytes());
  c.v8 = gpu::to_host<int8_t>(v8_, v8_.bytes());
  c.k_scale = gpu::to_host<float>(k_scale_, k_scale_.bytes() / sizeof(float));
  c.v_scale = gpu::to_host<float>(v_scale_, v_scale_.bytes() / sizeof(float));
  return c;
}

Fp16KvCache GpuKvCaches::download_fp16() const {
  gpu::device_synchronize("FP16 cache download");
  Fp16KvCache c;
  c.layout = layout_;
  c.k = gpu::to_host<uint16_t>(k_, k_.bytes() / sizeof(uint16_t));
  c.v = gpu::to_host<uint16_t>(v_, v_.bytes() / sizeof(uint16_t));
  return c;
}

GpuAppend::GpuAppend(const GpuKvCaches& caches, const std::vector<int64_t>& counts, const void* k_new,
                     const void* v_new)
    : int8_(caches.view(CacheKind::int8)),
      fp16_(caches.view(CacheKind::fp16)),
      counts_(counts),
      old_length_(caches.layout().length),
      k_new_(k_new),
      v_new_(v_new) {
  const std::vector<int64_t> touched = gpu::append_touched_offsets(caches.layout().capacity, old_length_, counts);
  cu_new_ = gpu::to_device(prefix_sums(counts));
  old_length_device_ = gpu::to_device(old_length_);
  touched_offset_ = gpu::to_device(touched);
  total_touched_ = touched.back();
}

gpu::KvAppendParams GpuAppend::params(CacheKind kind) const {
  gpu::KvAppendParams p;
  p.cache = kind == CacheKind::int8 ? int8_ : fp16_;
  p.k_new = k_new_;
  p.v_new = v_new_;
  p.cu_new = cu_new_.as<const int64_t>();
  p.old_length = old_length_device_.as<const int64_t>();
  p.touched_offset = touched_offset_.as<const int64_t>();
  p.total_touched = total_touched_;
  return p;
}

void GpuAppend::launch(CacheKind kind) const { gpu::kv_append(params(kind), nullptr); }

void GpuKvCaches::append(const GpuAppend& a) {
  if (layout_.length != a.old_length_) {
    throw std::logic_error("GpuKvCaches::append: the append was made for other cache lengths");
  }
  a.launch(CacheKind::int8);
  a.launch(CacheKind::fp16);
  gpu::device_synchronize("KV cache append");
  for (size_t b = 0; b < layout_.length.size(); ++b) layout_.length[b] += a.counts_[b];
}

DecodeGpu::DecodeGpu(const DecodeShape& shape, const std::vector<uint16_t>& q, GpuKvCaches caches,
                     const DecodeLaunchPlan& launch)
    : shape_(shape), caches_(std::move(caches)) {
  if (caches_.layout().length != shape.cache_len) {
    throw std::invalid_argument("DecodeGpu: the caches do not hold cache_len tokens per sequence");
  }
  const size_t out = static_cast<size_t>(shape.total_new()) * shape.hq * shape.d;
  if (q.size() != out) throw std::invalid_argument("DecodeGpu: q is not [total_new, hq, d]");
  q_ = gpu::to_device(q, "decode queries");
  o_ = gpu::DeviceBuffer(out * sizeof(uint16_t), "decode output");
  lse_ = gpu::DeviceBuffer(static_cast<size_t>(shape.total_new()) * shape.hq * sizeof(float), "decode LSE");
  cu_new_ = gpu::to_device(prefix_sums(shape.new_tokens));
  cache_len_ = gpu::to_device(shape.cache_len);
  set_launch_plan(launch);
}

void DecodeGpu::set_launch_plan(const DecodeLaunchPlan& launch) {
  if (!launch.splits.fits(shape_)) throw std::invalid_argument("DecodeGpu: the split plan does not fit the shape");
  launch_ = launch;
  split_offset_ = gpu::to_device(launch.splits.split_offset);
  split_first_tile_ = gpu::to_device(launch.splits.first_tiles(shape_));
  const size_t bytes = gpu::decode_workspace_bytes(launch);
  if (bytes > workspace_.bytes()) workspace_ = gpu::DeviceBuffer(bytes, "decode split workspace");
  const size_t arrival_bytes = gpu::decode_arrival_bytes(shape_.batch());
  if (arrival_bytes > arrivals_.bytes()) {
    arrivals_ = gpu::DeviceBuffer(arrival_bytes, "decode arrival counts");
    arrivals_.fill(0);
  }
}

std::vector<unsigned> DecodeGpu::arrival_counts() const {
  return gpu::to_host<unsigned>(arrivals_, arrivals_.bytes() / sizeof(unsigned));
}

DecodeGpu::DecodeGpu(const PreparedDecode& pd, const DecodeLaunchPlan& launch)
    : DecodeGpu(pd.shape, pd.q, GpuKvCaches(pd.int8, pd.fp16), launch) {
  set_routing(pd.plan, pd.plan.words);
}

void DecodeGpu::set_routing(const RoutingPlan& plan, const std::vector<uint64_t>& words) {
  // One query tile per sequence: words are [hk][batch].
  if (plan.hk != shape_.hk || plan.total_tiles() != shape_.batch() ||
      words.size() != static_cast<size_t>(shape_.hk) * shape_.batch()) {
    throw std::invalid_argument("DecodeGpu::set_routing: the plan was not built for this decode shape");
  }
  const std::vector<int> groups = plan.groups();
  words_ = gpu::to_device(words, "routing words");
  group_ = gpu::to_device(groups, "routing groups");
  routes_ = decode_routes(shape_, words, groups);
  routed_ = true;
}

gpu::DecodeParams DecodeGpu::params() const {
  gpu::DecodeParams p;
  p.q = q_.data();
  p.o = o_.data();
  p.lse = lse_.as<float>();
  p.cu_new = cu_new_.as<const int64_t>();
  p.cache_len = cache_len_.as<const int64_t>();
  p.cache = caches_.view(launch_.cache);
  p.batch = shape_.batch();
  p.hq = shape_.hq;
  p.hk = shape_.hk;
  p.d = shape_.d;
  p.total_new = shape_.total_new();
  p.max_new_tokens = shape_.max_new_tokens();
  p.softmax_scale = shape_.softmax_scale;
  p.words = words_.as<const uint64_t>();
  p.group = group_.as<const int>();
  p.plan = &launch_;
  p.split_offset = split_offset_.as<const int64_t>();
  p.split_first_tile = split_first_tile_.as<const int>();
  p.workspace = workspace_.data();
  p.arrivals = arrivals_.as<unsigned>();
  p.timeline = timeline_;
  if (launch_.cache == CacheKind::int8) p.routes = routes_;
  return p;
}

void DecodeGpu::launch() {
  if (launch_.cache == CacheKind::int8) {
    if (!routed_) throw std::logic_error("DecodeGpu: the INT8 cache needs set_routing first");
    gpu::decode_int8(params(), nullptr);
  } else {
    gpu::decode_fp16(params(), nullptr);
  }
}

std::vector<std::vector<uint64_t>> DecodeGpu::timeline(const std::function<void()>& launch) {
  gpu::DeviceBuffer rows(gpu::decode_timeline_bytes(launch_), "decode timeline");
  const size_t ctas = rows.bytes() / (gpu::kDecodeTimelineSlots * sizeof(uint64_t));
  rows.fill(0);
  timeline_ = rows.as<uint64_t>();
  try {
    launch();
    gpu::device_synchronize("decode timeline");
  } catch (...) {
    timeline_ = nullptr;
    throw;
  }
  timeline_ = nullptr;
  const std::vector<uint64_t> flat = gpu::to_host<uint64_t>(rows, ctas * gpu::kDecodeTimelineSlots);
  std::vector<std::vector<uint64_t>> out;
  out.reserve(ctas);
  for (size_t i = 0; i < ctas; ++i) {
    out.emplace_back(flat.begin() + i * gpu::kDecodeTimelineSlots, flat.begin() + (i + 1) * gpu::kDecodeTimelineSlots);
  }
  return out;
}

DecodeOutput DecodeGpu::fetch() {
  gpu::device_synchronize("decode run");
  DecodeOutput out;
  out.o = gpu::to_host<uint16_t>(o_, o_.bytes() / sizeof(uint16_t));
  out.lse = gpu::to_host<float>(lse_, lse_.bytes() / sizeof(float));
  return out;
}

DecodeOutput DecodeGpu::run() {
  o_.poison();
  lse_.poison();
  workspace_.poison();
  launch();
  return fetch();
}

int64_t DecodeGpu::resident_bytes(CacheKind kind, gpu::MemoryCount how) const {
  int64_t bytes = caches_.bytes(kind, how);
  for (const gpu::DeviceBuffer* b :
       {&q_, &o_, &lse_, &cu_new_, &cache_len_, &split_offset_, &split_first_tile_, &workspace_, &arrivals_}) {
    bytes += static_cast<int64_t>(b->count(how));
  }
  if (kind == CacheKind::int8) bytes += static_cast<int64_t>(words_.count(how) + group_.count(how));
  return bytes;
}

int64_t DecodeGpu::bytes_moved(CacheKind kind) const {
  const int64_t row = static_cast<int64_t>(shape_.hk) * shape_.d;
  int64_t bytes = static_cast<int64_t>(q_.bytes() + o_.bytes() + lse_.bytes());
  for (int64_t len : shape_.cache_len) {
    if (kind == CacheKind::int8) {
      const int64_t blocks = (len + kCacheBlock - 1) / kCacheBlock;
      bytes += 2 * len * row + 2 * blocks * shape_.hk * static_cast<int64_t>(sizeof(float));
    } else {
      bytes += 2 * len * row * static_cast<int64_t>(sizeof(uint16_t));
    }
  }
  return bytes;
}

}  // namespace tilemix::app
