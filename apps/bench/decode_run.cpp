#include "apps/bench/decode_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "apps/bench/sweep.hpp"
#include "apps/common/decode_gpu.hpp"
#include "apps/common/prepared_case.hpp"
#include "apps/common/table_columns.hpp"
#include "core/decode/decode_case.hpp"
#include "core/inputs/inputs.hpp"
#include "core/problem.hpp"
#include "core/report/table.hpp"
#include "core/sizes.hpp"
#include "tilemix/decode.hpp"
#include "tilemix/device_buffer.hpp"
#include "tilemix/gpu.hpp"
#include "tilemix/timing.hpp"

namespace tilemix::app {
namespace {

// Bytes per copy of the device-to-device reference (2 GiB read and 2 GiB written): far past L2.
constexpr size_t kCopyBytes = size_t{2} << 30;
// The context is appended in chunks of at most this many tokens per sequence (whole cache blocks),
// so the FP16 source of a chunk stays small next to caches of many GiB.
constexpr int64_t kChunkTokens = 8192;

double gib(int64_t bytes) { return static_cast<double>(bytes) / double(1ull << 30); }

// A shape's problem on one device: both caches filled by GPU appends, the new tokens' append kept
// for timing (its buffers and lengths stay valid), the decode runner.
struct DeviceProblem {
  gpu::DeviceBuffer k_new, v_new;
  std::unique_ptr<GpuAppend> append_new;
  std::unique_ptr<DecodeGpu> decode;
};

std::unique_ptr<DeviceProblem> build_problem(const CaseSpec& spec, DecodeTarget target) {
  const DecodeShape& shape = spec.decode->shape;
  const int64_t row = static_cast<int64_t>(shape.hk) * shape.d;
  auto problem = std::make_unique<DeviceProblem>();
  GpuKvCaches caches(make_cache_layout(shape.hk, shape.d, shape.cache_len));
  const uint64_t seed = spec.input.seed * 0x9e3779b97f4a7c15ull;

  // The context, in chunks of whole blocks.
  std::vector<int64_t> context(shape.cache_len.size());
  for (size_t b = 0; b < context.size(); ++b) context[b] = shape.cache_len[b] - shape.new_tokens[b];
  for (uint64_t chunk = 1;; ++chunk) {
    std::vector<int64_t> counts(context.size());
    int64_t total = 0;
    for (size_t b = 0; b < counts.size(); ++b) {
      counts[b] = std::min(kChunkTokens, context[b] - caches.layout().length[b]);
      total += counts[b];
    }
    if (total == 0) break;
    gpu::DeviceBuffer k(static_cast<size_t>(total * row) * sizeof(uint16_t), "context K chunk");
    gpu::DeviceBuffer v(static_cast<size_t>(total * row) * sizeof(uint16_t), "context V chunk");
    gpu::fill_random_fp16(k.data(), total * row, seed + 2 * chunk, 1.0f, nullptr);
    gpu::fill_random_fp16(v.data(), total * row, seed + 2 * chunk + 1, 1.0f, nullptr);
    caches.append(GpuAppend(caches, counts, k.data(), v.data()));
  }

  // The new tokens: appended once here, timed later with the same lengths.
  const int64_t total_new = shape.total_new();
  problem->k_new = gpu::DeviceBuffer(static_cast<size_t>(total_new * row) * sizeof(uint16_t), "new K");
  problem->v_new = gpu::DeviceBuffer(static_cast<size_t>(total_new * row) * sizeof(uint16_t), "new V");
  gpu::fill_random_fp16(problem->k_new.data(), total_new * row, seed - 1, 1.0f, nullptr);
  gpu::fill_random_fp16(problem->v_new.data(), total_new * row, seed - 2, 1.0f, nullptr);
  problem->append_new =
      std::make_unique<GpuAppend>(caches, shape.new_tokens, problem->k_new.data(), problem->v_new.data());
  caches.append(*problem->append_new);

  InputSpec q_spec;
  q_spec.seed = spec.input.seed;
  AttentionShape q_shape = shape.attention_shape();
  q_shape.cu_seqlens_k = q_shape.cu_seqlens_q;  // only Q is drawn here
  const std::vector<uint16_t> q = make_inputs(q_shape, q_spec, spec.where + ".input").q;
  problem->decode = std::make_unique<DecodeGpu>(shape, q, std::move(caches),
                                                plan_decode_launch(shape, CacheKind::int8, target));
  return problem;
}

// Device bytes a shape needs: both caches, the largest context chunk, queries and outputs.
int64_t bytes_needed(const CaseSpec& spec) {
  const DecodeShape& shape = spec.decode->shape;
  int64_t tokens = 0, blocks = 0, chunk = 0;
  for (size_t b = 0; b < shape.cache_len.size(); ++b) {
    const int64_t capacity = (shape.cache_len[b] + kCacheBlock - 1) / kCacheBlock * kCacheBlock;
    tokens += capacity;
    blocks += capacity / kCacheBlock;
    chunk += std::min(kChunkTokens, shape.cache_len[b]);
  }
  const std::string& at = spec.where;
  return checked_sum(
      at, "the device bytes of the case",
      {checked_product(at, "the INT8 and FP16 caches [capacity, hk, d]",
                       {{tokens, "capacity tokens"}, {shape.hk, "hk"}, {shape.d, "d"}, {2 * (1 + 2), "bytes"}}),
       checked_product(at, "the cache scales", {{blocks, "blocks"}, {shape.hk, "hk"}, {2 * 4, "bytes"}}),
       checked_product(at, "the K and V of one context chunk",
                       {{chunk, "chunk tokens"}, {shape.hk, "hk"}, {shape.d, "d"}, {2 * 2, "bytes"}}),
       checked_product(at, "the queries and outputs",
                       {{shape.total_new(), "total_new"}, {shape.hq, "hq"}, {shape.d, "d"}, {2 * 3, "bytes"}})});
}

struct MethodRun {
  std::optional<gpu::TimingResult> decode, append;
  std::string status = "ok";
  int64_t resident_bytes = 0, resident_measured = 0, bytes_moved = 0;
  DecodePlanColumns launch;  // the launch plan it ran
  std::string routes;        // INT8 cache: what the routing words hold (picks the wgmma kernel's instance)
};

// The cache a decode method reads.
CacheKind cache_of(Method m) {
  switch (m) {
    case Method::tilemix:
      return CacheKind::int8;
    case Method::fp16_cache:
      return CacheKind::fp16;
    case Method::flash_fp16:
    case Method::torch_like:
    case Method::cudnn_fp16:
    case Method::cudnn_fp8:
      break;  // the config reader refuses them for decode cases
  }
  throw std::logic_error(std::string(to_string(m)) + " runs no decode cases");
}

// The config's methods in the order they run: the baseline first, the base of every speedup.
std::vector<Method> decode_run_order(const ExperimentConfig& config) {
  std::vector<Method> methods = methods_to_run(config, CaseKind::decode);
  std::stable_partition(methods.begin(), methods.end(), [](Method m) { return !is_routed(m); });
  return methods;
}

// One call's per-CTA timeline as CSV: times in microseconds after the first CTA's start.
void write_timeline(const std::string& dir, const std::string& case_name, const std::string& method,
                    const std::string& routes, double median_ms, const std::vector<std::vector<uint64_t>>& rows) {
  uint64_t t0 = ~0ull;
  for (const auto& r : rows) {
    if (r[gpu::kTimelineStart] != 0) t0 = std::min(t0, r[gpu::kTimelineStart]);
  }
  const auto us = [&](uint64_t t) { return t == 0 ? std::string("") : fmt::format("{:.3f}", (t - t0) * 1e-3); };
  std::string csv = fmt::format("# case {}, method {}{}, timed median {:.4f} ms\n", case_name, method,
                                routes.empty() ? "" : ", routes " + routes, median_ms);
  csv += "cta,sm,start_us,loop_start_us,loop_end_us,end_us,tiles,fp16_tiles,sequence,split,kv_head\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{}\n", i, r[gpu::kTimelineSm], us(r[gpu::kTimelineStart]),
                       us(r[gpu::kTimelineLoopStart]), us(r[gpu::kTimelineLoopEnd]), us(r[gpu::kTimelineEnd]),
                       r[gpu::kTimelineTiles], r[gpu::kTimelineFp16Tiles], r[gpu::kTimelineSequence],
                       r[gpu::kTimelineSplit], r[gpu::kTimelineKvHead]);
  }
  write_text_file(dir + "/timeline-" + file_stem(case_name + "-" + method) + ".csv", csv);
}

void run_groups(const ExperimentConfig& config, const std::vector<const CaseGroup*>& groups,
                int device_index, const DecodeBenchOptions& options, std::atomic<int>& cases_done,
                const RowSink& emit, const std::function<bool()>& stop) {
  const std::vector<Method> methods = decode_run_order(config);
  gpu::select_device(device_index);
  const gpu::DeviceInfo device = gpu::device_info(device_index);
  const gpu::TimingOptions timing = timing_options(config.timing);
  fmt::print(stderr, "gpu {}: measuring the device-to-device copy bandwidth ({} GiB)\n", device_index,
             gib(static_cast<int64_t>(kCopyBytes)));
  const double copy_gbps = gpu::measure_copy_bandwidth_gbps(kCopyBytes);

  for (const auto* group : groups) {
    if (stop()) return;
    const CaseSpec& first = *group->front();
    const DecodeShape& shape = first.decode->shape;
    std::unique_ptr<DeviceProblem> problem;
    std::string skipped;
    const int64_t needed = bytes_needed(first);
    if (needed > device.global_mem_bytes * 9 / 10) {
      skipped = fmt::format("skipped (needs {:.1f} GiB of {:.1f})", gib(needed), gib(device.global_mem_bytes));
    } else {
      run_case_within_host_memory(first, decode_gpu_bytes(first),
                                  [&] {
                                    problem = build_problem(first, {device.sm_count, device.compute_capability()});
                                  });
    }
    std::optional<MethodRun> fp16_run;  // the baseline of this shape, for every case's speedup
    int fp16_tiles_per_split = 0;        // and the split plan and combine it was measured with
    DecodeCombineWait fp16_combine = DecodeCombineWait::automatic;
    for (const CaseSpec* spec_ptr : *group) {
      const CaseSpec& spec = *spec_ptr;
      const int index = ++cases_done;
      if (spec.decode->tiles_per_split != fp16_tiles_per_split || spec.decode->combine != fp16_combine) {
        fp16_run.reset();
      }
      RoutingPlan plan;
      if (problem) {
        plan = make_plan(shape.attention_shape(), spec.routing, spec.where);
        problem->decode->set_routing(plan, plan.words);
      }
      for (const Method method : methods) {
        if (stop()) return;
        const bool baseline = !is_routed(method);
        // The baseline does not depend on the routing: one row per shape and split plan.
        if (baseline && fp16_run) continue;
        const CacheKind kind = cache_of(method);
        const char* name = to_string(method);
        fmt::print(stderr, "[{}/{}] gpu {}: {} {}\n", index, config.cases.size(), device_index, spec.name, name);
        MethodRun run;
        if (problem) {
          DecodeGpu& decode = *problem->decode;
          decode.set_launch_plan(
              plan_decode_launch(shape, kind, {device.sm_count, device.compute_capability()},
                                 decode_launch_choices(*spec.decode), &plan));
          run.launch = decode_plan_columns(decode.launch_plan());
          if (!baseline) run.routes = to_string(decode.routes());
          run.decode = gpu::time_launches([&](int) { decode.launch(); }, timing);
          if (!options.timeline_dir.empty()) {
            gpu::TimingOptions once = timing;
            once.warmup = 0;
            once.warmup_seconds = 0.0;
            once.min_reps = once.max_reps = 1;
            const auto rows = decode.timeline([&] { gpu::time_launches([&](int) { decode.launch(); }, once); });
            write_timeline(options.timeline_dir, spec.name, name, run.routes, run.decode->median_ms, rows);
          }
          run.append = gpu::time_launches([&](int) { problem->append_new->launch(kind); }, timing);
          run.resident_bytes = decode.resident_bytes(kind);
          run.resident_measured = decode.resident_bytes(kind, gpu::MemoryCount::measured);
          run.bytes_moved = decode.bytes_moved(kind);
          for (const auto& t : {run.decode, run.append}) {
            if (t->throttled) {
              fmt::print(stderr, "tilemix-bench: warning: {} {}: {}\n", spec.name, name, t->clock_note);
            }
          }
        } else {
          run.status = skipped;
        }
        if (baseline) {
          fp16_run = run;
          fp16_tiles_per_split = spec.decode->tiles_per_split;
          fp16_combine = spec.decode->combine;
        }

        DecodeGpuRow row{{spec, name, !baseline, problem ? &plan : nullptr},
                         kind,
                         to_string(run.launch.mainloop),
                         run.routes,
                         run.launch.combine,
                         run.launch.total_splits,
                         {timing_of(run.decode), device_index, run.status},
                         timing_of(run.append),
                         fp16_run ? timing_of(fp16_run->decode) : nullptr,
                         run.bytes_moved,
                         copy_gbps,
                         {run.resident_bytes, run.resident_measured}};
        emit(decode_gpu_table().cells(row));
      }
    }
  }
}

}  // namespace

ResultTable decode_bench_table() { return decode_gpu_table().empty_table(); }

DecodePlanColumns decode_plan_columns(const DecodeLaunchPlan& launch) {
  DecodePlanColumns columns;
  columns.mainloop = launch.mainloop;
  columns.total_splits = launch.splits.total_splits();
  columns.combine = launch.splits.has_cuts() ? to_string(launch.combine) : "none";
  return columns;
}

void run_decode_bench(const ExperimentConfig& config, const std::vector<int>& devices,
                      const DecodeBenchOptions& options, ResultTable& table, const std::function<void()>& on_row,
                      const std::function<bool()>& stop) {
  // Cases grouped by shape (first-appearance order): a group's caches are built once.
  const auto groups = group_cases(config, decode_group_key);
  std::atomic<int> cases_done{0};
  shard_over_devices(groups, devices, table, on_row,
                     [&](const std::vector<const CaseGroup*>& share, int device, const RowSink& emit) {
                       run_groups(config, share, device, options, cases_done, emit, stop);
                     });
}

}  // namespace tilemix::app
