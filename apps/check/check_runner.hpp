#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "apps/common/device_choice.hpp"
#include "apps/common/table_columns.hpp"
#include "core/config/experiment.hpp"
#include "core/metrics.hpp"
#include "core/report/table.hpp"

namespace tilemix::app {

struct CheckRun {
  ResultTable table;  // one row per comparison (case x baseline)
  int passed = 0;     // cases with every comparison within tolerance
  int failed = 0;
  nlohmann::json device;
};

// Replaces the input seed of every generated (non-npy) input with a random one, recorded in the
// case's JSON and in the results table.
void draw_fresh_input_seeds(ExperimentConfig& config);

// Adds one comparison of `checked` to `table`; `ok` becomes false when it leaves `tol`.
void add_check_row(ResultTable& table, const CheckedCase& checked, const std::string& compare, const Deviation& dev,
                   const Tolerance& tol, bool& ok);

// `t`, or an InputError naming spec.where.tolerance.<name> when the config leaves it unset.
const Tolerance& require_tolerance(const CaseSpec& spec, const Tolerance& t, const char* name);

// Runs every case whose name contains `filter`. Progress goes to stderr.
CheckRun run_checks(const ExperimentConfig& config, const DeviceChoice& device, const std::string& filter);

}  // namespace tilemix::app
