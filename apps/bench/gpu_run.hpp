#pragma once
// The GPU side of tilemix-bench: each case of the sweep runs the config's methods on one device,
// timed with CUDA events (times include quantization), beside flash_fp16 measured in the same run.
#include <functional>
#include <string>
#include <vector>

#include "core/config/experiment.hpp"
#include "core/report/table.hpp"

namespace tilemix::app {

struct GpuBenchOptions {
  bool deviation_vs_flash = false;      // O of each method vs flash_fp16's O (same inputs)
  bool deviation_vs_reference = false;  // vs the exact CPU reference (slow for long sequences)
};

// Empty table with the bench's columns for `config` (prefill_gpu_table(compares(config))).
ResultTable gpu_bench_table(const ExperimentConfig& config);

// Runs the sweep, sharded over `devices` (shape groups dealt round-robin, one thread per device).
// `on_row` is called after every finished row (the caller rewrites its output files then, so an
// interrupted sweep keeps every finished row). Stops early when `stop()` is true.
void run_gpu_bench(const ExperimentConfig& config, const std::vector<int>& devices, const GpuBenchOptions& options,
                   ResultTable& table, const std::function<void()>& on_row, const std::function<bool()>& stop);

}  // namespace tilemix::app
