#pragma once
// What every GPU sweep of tilemix-bench shares: dealing the groups of cases that share device
// data (apps/bench/case_groups.hpp) to devices (one thread per device), collecting rows, and
// timing options.
#include <functional>
#include <string>
#include <vector>

#include "apps/bench/case_groups.hpp"
#include "core/config/experiment.hpp"
#include "core/report/table.hpp"
#include "tilemix/timing.hpp"

namespace tilemix::app {

using RowSink = std::function<void(std::vector<Cell>)>;

// Deals `groups` round-robin to `devices` and runs `run(share, device, emit)` in one thread per
// device; `emit` appends a finished row to `table` under a lock and calls `on_row` (the caller
// rewrites its output files there, so an interrupted sweep keeps every finished row). The first
// exception of any thread is rethrown after all have stopped.
void shard_over_devices(
    const std::vector<CaseGroup>& groups, const std::vector<int>& devices, ResultTable& table,
    const std::function<void()>& on_row,
    const std::function<void(const std::vector<const CaseGroup*>& share, int device, const RowSink& emit)>& run);

gpu::TimingOptions timing_options(const TimingSpec& timing);

// Runs one method of a row: "ok", or the row's status when the device had no room for it
// ("OOM (N GiB asked)") or the method cannot run the case ("unavailable (why)"). Any other
// failure propagates and ends the sweep.
std::string run_status(const std::function<void()>& run);

}  // namespace tilemix::app
