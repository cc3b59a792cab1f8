#pragma once
// The decode sweeps of tilemix-bench (GPU): per decode case, `tilemix` (the INT8 KV cache, routed
// by the case's layout) and `fp16_cache` (the same kernel shape over the FP16 cache), timed with
// CUDA events. Decode times include the on-chip quantization of Q and the combine of the splits;
// appending the case's new tokens to the cache is timed separately (append_ms). Achieved GB/s
// counts the bytes a call must move (the cache tokens held and their scales, Q, O and LSE) and is
// set beside the device-to-device copy bandwidth measured once per device in the same run.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/config/experiment.hpp"
#include "core/report/table.hpp"
#include "kernels/decode/plan.hpp"

namespace tilemix::app {

// Empty table with the decode bench's columns.
ResultTable decode_bench_table();

// The launch plan's columns of a decode bench row: the mainloop that ran, the splits and what the
// combine waited for ("none" where no sequence is cut and no combine ran).
struct DecodePlanColumns {
  DecodeMainloop mainloop = DecodeMainloop::mma_sync;
  int64_t total_splits = 0;
  std::string combine;
};
DecodePlanColumns decode_plan_columns(const DecodeLaunchPlan& launch);

struct DecodeBenchOptions {
  // When set: after each row's timing, one more call with per-CTA timestamps, written to
  // <timeline_dir>/timeline-<case>-<method>.csv (scripts/decode_timeline.py summarizes them).
  std::string timeline_dir;
};

// Runs the decode cases of `config` (all cases must be decode cases), sharded over `devices` by
// shape (one thread per device). `on_row` follows every finished row; stops early when `stop()`.
void run_decode_bench(const ExperimentConfig& config, const std::vector<int>& devices,
                      const DecodeBenchOptions& options, ResultTable& table, const std::function<void()>& on_row,
                      const std::function<bool()>& stop);

}  // namespace tilemix::app
