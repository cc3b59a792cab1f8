// Device memory as counted for the bench's resident columns: what an allocation took as the
// driver reports it (the drop in free memory across cudaMalloc), beside the bytes asked for, and
// the buffers a prefill call counts.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "apps/common/decode_gpu.hpp"
#include "apps/common/gpu_problem.hpp"
#include "core/config/experiment.hpp"
#include "core/decode/decode_case.hpp"
#include "core/quant.hpp"
#include "tests/reference/attention_fixtures.hpp"
#include "tilemix/attention.hpp"
#include "tilemix/device_buffer.hpp"

using namespace tilemix;
using namespace tilemix::app;
using namespace tilemix::testing;

namespace {
constexpr int64_t kMiB = int64_t{1} << 20;
}  // namespace

TEST_CASE("a device buffer measures what its allocation took", "[gpu][memory]") {
  constexpr size_t kBytes = size_t{64} << 20;
  const gpu::DeviceBuffer buffer(kBytes, "64 MiB");
  CHECK(buffer.count(gpu::MemoryCount::allocated) == kBytes);
  // Whole pages of the allocator: at least the bytes asked for, and not a lot more.
  const auto measured = static_cast<int64_t>(buffer.count(gpu::MemoryCount::measured));
  INFO("measured " << measured << " bytes");
  CHECK(measured >= static_cast<int64_t>(kBytes));
  CHECK(measured <= static_cast<int64_t>(kBytes) + 8 * kMiB);
  const gpu::DeviceBuffer empty;
  CHECK(empty.count(gpu::MemoryCount::measured) == 0);
}

TEST_CASE("a decode call's resident bytes, allocated and measured, agree to the allocator's pages",
          "[gpu][memory][decode]") {
  CaseSpec spec;
  spec.name = "memory";
  spec.where = "test";
  DecodeCaseSpec dc;
  dc.shape = make_decode_shape(8, 2, 128, {65536, 3000}, {4, 1});
  spec.shape = dc.shape.attention_shape();
  spec.routing.layout = LayoutKind::one;
  spec.routing.ratio = 1.0;
  spec.routing.geometry = kDecodeGeometry;
  spec.decode = dc;
  const PreparedDecode pd = prepare_decode(spec);
  DecodeLaunchChoices sixteen_tile_splits;
  sixteen_tile_splits.tiles_per_split = 16;
  const DecodeGpu gpu(pd, plan_decode_launch(pd.shape, CacheKind::int8, 132, sixteen_tile_splits));
  for (CacheKind kind : {CacheKind::int8, CacheKind::fp16}) {
    const int64_t allocated = gpu.resident_bytes(kind);
    const int64_t measured = gpu.resident_bytes(kind, gpu::MemoryCount::measured);
    INFO("cache " << (kind == CacheKind::int8 ? "int8" : "fp16") << ": allocated " << allocated << ", measured "
                  << measured);
    // About 20 buffers, each off by less than one 2 MiB page either way.
    CHECK(std::llabs(measured - allocated) <= 40 * kMiB);
    CHECK(measured > 0);
  }
}

TEST_CASE("a prefill call with smooth_k counts Ks, kbar, its block sums and qkbar", "[gpu][memory]") {
  const AttentionShape s = make_shape(6, 2, 128, true, {700, 300}, {700, 300});
  GpuProblem gpu(s, seeded_inputs(s, 5));
  const RoutingPlan plan = layout_plan(s, gpu::tilemix_geometry(128), LayoutKind::one);
  gpu.set_routing(plan, plan.words);
  const int64_t channels = int64_t{s.hk} * s.d;
  const int64_t key_blocks = scale_block_offsets(s.cu_seqlens_k, kBlockK).back();
  const int64_t smoothing = int64_t{2} * s.total_k() * channels +
                            int64_t{4} * ((s.batch() + key_blocks) * channels + s.total_q() * s.hq);
  Numerics plain, smooth;
  smooth.smooth_k = true;
  CHECK(gpu.resident_bytes(true, smooth) - gpu.resident_bytes(true, plain) == smoothing);
  // on_the_fly holds no codes, but the smoothing pass reads the K block offsets.
  plain.mode = smooth.mode = QuantMode::on_the_fly;
  CHECK(gpu.resident_bytes(true, smooth) - gpu.resident_bytes(true, plain) ==
        smoothing + static_cast<int64_t>(sizeof(int64_t)) * (s.batch() + 1));
  // flash_fp16 runs unsmoothed.
  CHECK(gpu.resident_bytes(false, smooth) == gpu.resident_bytes(false, plain));
}
