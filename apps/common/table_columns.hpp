#pragma once
// The tables of tilemix-bench and tilemix-check. Each column is declared once, its key, header
// and precision beside the function that makes its cell from a row, so a table's columns and
// its cells cannot drift apart. The groups of columns that several tables share (a bench row's
// case, a GPU row's timing, residency, clock, device and status) are defined once, in
// table_columns.cpp.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/config/experiment.hpp"
#include "core/decode/decode_case.hpp"
#include "core/metrics.hpp"
#include "core/report/table.hpp"
#include "core/routing/coverage.hpp"
#include "core/routing/plan.hpp"
#include "tilemix/timing.hpp"

namespace tilemix::app {

// The columns of a table whose rows are made from a `Row`.
template <typename Row>
class TableLayout {
 public:
  using MakeCell = std::function<Cell(const Row&)>;

  TableLayout& add(Column column, MakeCell cell) {
    columns_.push_back(std::move(column));
    cells_.push_back(std::move(cell));
    return *this;
  }
  TableLayout& add(const TableLayout& group) {
    return add(group, [](const Row& row) -> const Row& { return row; });
  }
  // Appends the columns of `group`, whose cells are made from the part of a Row that `part` gives
  // (a pointer to a member, or a function).
  template <typename Part, typename GetPart>
  TableLayout& add(const TableLayout<Part>& group, GetPart part) {
    for (size_t i = 0; i < group.columns_.size(); ++i) {
      add(group.columns_[i], [cell = group.cells_[i], part](const Row& row) { return cell(std::invoke(part, row)); });
    }
    return *this;
  }

  const std::vector<Column>& columns() const { return columns_; }
  ResultTable empty_table() const {
    ResultTable t;
    t.columns = columns_;
    return t;
  }
  std::vector<Cell> cells(const Row& row) const {
    std::vector<Cell> out;
    out.reserve(cells_.size());
    for (const auto& cell : cells_) out.push_back(cell(row));
    return out;
  }

 private:
  template <typename>
  friend class TableLayout;
  std::vector<Column> columns_;
  std::vector<MakeCell> cells_;
};

// ---- tilemix-bench ----

// The case a bench row ran, and with what.
struct CaseRow {
  const CaseSpec& spec;
  std::string method;                 // a method's name, or the label of a row that is not a method ("emulator")
  bool routed = false;                // false leaves the routing cells empty: a baseline runs without routing
  const RoutingPlan* plan = nullptr;  // the routing it ran with; null when no plan was made
};

// What a GPU row measured.
struct GpuMeasurement {
  const gpu::TimingResult* timing = nullptr;  // null when the method did not run
  int device = 0;
  std::string status;  // "ok", "OOM (...)", "unavailable (...)", "skipped (...)"
};

// The timing a row shows: null when the method did not run.
inline const gpu::TimingResult* timing_of(const std::optional<gpu::TimingResult>& t) { return t ? &*t : nullptr; }

// Device memory of one call, as allocated and as the driver measured the allocations.
struct Residency {
  int64_t allocated = 0, measured = 0;
};

// A row's output against the run its case's compare_with names.
struct ComparedDeviation {
  std::string with;                    // what that run was: the comparison's label, or its CPU stand-in
  std::optional<Deviation> deviation;  // empty when this row or that run did not run
};

// A row of the prefill GPU sweep.
struct PrefillGpuRow {
  CaseRow what;
  GpuMeasurement measured;
  double ops = 0.0, tokens = 0.0;            // of one call, for TOPS and tokens per second
  const gpu::TimingResult* flash = nullptr;  // flash_fp16 on the same case: the speedup base
  Residency resident;
  std::optional<double> rel_l2_vs_flash, rel_l2_vs_ref;
  std::optional<ComparedDeviation> compared;  // the case's compare_with
  const gpu::TimingResult* route = nullptr;   // building the words on the GPU (adaptive), also inside the row's time
  std::optional<double> quant_ms;  // tilemix: its quantization passes alone (0: none), also inside the row's time
};

// A row of the decode GPU sweep.
struct DecodeGpuRow {
  CaseRow what;
  CacheKind cache = CacheKind::int8;
  std::string mainloop;  // the one that ran
  std::string routes;    // INT8 cache: what the routing words hold; empty otherwise
  std::string combine;   // what the split combine waited for; empty when not known
  int64_t splits = 0;
  GpuMeasurement measured;                        // of the decode call
  const gpu::TimingResult* append = nullptr;      // appending the case's new tokens
  const gpu::TimingResult* fp16_cache = nullptr;  // fp16_cache on the same shape: the speedup base
  int64_t bytes_moved = 0;                        // what one decode call must move, for GB/s
  double copy_gbps = 0.0;                         // the device-to-device copy bandwidth, measured in the same run
  Residency resident;
};

// Max |logit| of the reference model, and the logits' deviation from it.
struct LogitDeviation {
  double reference_max_abs = 0.0, max_abs = 0.0, mean_abs = 0.0;
};

// A row of the model sweep.
struct ModelRow {
  CaseRow what;
  std::string reference;                    // the reference model's attention: "torch_like" (GPU) or "exact" (CPU)
  std::optional<double> seconds;            // the model's run; empty when it did not run
  std::optional<LogitDeviation> deviation;  // when it and the reference ran
  std::string status;
};

// A row of the CPU emulator sweep.
struct EmulatorRow {
  CaseRow what;
  double cpu_ms = 0.0;
  const Deviation& vs_reference;
  const HeavyHitterExposure& exposure;  // at tau 5/10/20/30%
  std::optional<ComparedDeviation> compared = std::nullopt;  // the case's compare_with
};

// True when a case of `config` names a run to compare with: its prefill and emulator tables then
// have the columns of that comparison (compared_with, max|d| cmp, mean|d| cmp, rel.L2 cmp).
bool compares(const ExperimentConfig& config);

const TableLayout<PrefillGpuRow>& prefill_gpu_table(bool with_comparison = false);
const TableLayout<DecodeGpuRow>& decode_gpu_table();
const TableLayout<ModelRow>& model_table();
const TableLayout<EmulatorRow>& emulator_table(bool with_comparison = false);

// ---- tilemix-check ----

// What a check row compared: the case as it ran.
struct CheckedCase {
  const CaseSpec& spec;
  const Coverage& coverage;  // of the plan it ran with
  std::string shape;         // shape_summary() or decode_shape_summary()
  std::string state, accum, mode;
  std::optional<bool> smooth_k;  // prefill cases; decode takes no key smoothing
  std::optional<std::string> pv;  // prefill cases: the P V precision
};

// One comparison of a checked case.
struct CheckRow {
  const CheckedCase& checked;
  std::string compare;  // "emulator~reference", "gpu~emulator", "gpu~reference"
  const Deviation& deviation;
  bool pass = false;
  std::string why;  // the tolerance it left, when it failed
};

const TableLayout<CheckRow>& check_table();

}  // namespace tilemix::app
