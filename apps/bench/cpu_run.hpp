#pragma once
// The CPU side of tilemix-bench: with no GPU it runs the emulator (and the exact reference for the
// deviation columns) on the config's cases, so the tool always shows what routing costs in accuracy.
#include <string>

#include "core/config/experiment.hpp"
#include "core/report/table.hpp"

namespace tilemix::app {

// Config used when tilemix-bench runs with no --config.
const char* default_bench_config_json();

// One row per case. `dump_dir` (may be empty) receives q/k/v/o/o_ref .npy files and meta JSON.
ResultTable run_emulator_bench(const ExperimentConfig& config, const std::string& dump_dir);

}  // namespace tilemix::app
