#include "apps/common/table_columns.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/problem.hpp"
#include "core/routing/layout.hpp"

namespace tilemix::app {
namespace {

Cell optional_cell(const std::optional<double>& v) { return v ? Cell{*v} : Cell{}; }

double mib(int64_t bytes) { return static_cast<double>(bytes) / double(1 << 20); }

// The value when every entry is equal, -1 when they differ (the config holds them).
int64_t equal_or_minus_one(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == v.front(); }) ? v.front() : -1;
}

std::vector<int64_t> sequence_lengths(const std::vector<int64_t>& cu_seqlens) {
  std::vector<int64_t> lengths;
  for (size_t b = 0; b + 1 < cu_seqlens.size(); ++b) lengths.push_back(cu_seqlens[b + 1] - cu_seqlens[b]);
  return lengths;
}

// "w=3 G=1; w=5 G=1": the parameters of every sequence geometry's template.
std::string params_text(const RoutingPlan& plan) {
  std::string text;
  for (const auto& tpl : plan.templates) text += (text.empty() ? "" : "; ") + tpl.params.to_string();
  return text;
}

// ---- A bench row's case ----

TableLayout<CaseRow> case_and_method_columns() {
  TableLayout<CaseRow> t;
  t.add({"case", "case"}, [](const CaseRow& r) -> Cell { return r.spec.name; });
  t.add({"method", "method"}, [](const CaseRow& r) -> Cell { return r.method; });
  return t;
}

// The requested routing and the coverage its plan realized.
TableLayout<CaseRow> routing_columns() {
  TableLayout<CaseRow> t;
  t.add({"layout", "layout"}, [](const CaseRow& r) -> Cell {
    return r.routed ? Cell{std::string(to_string(r.spec.routing.layout))} : Cell{};
  });
  t.add({"ratio", "ratio", 3}, [](const CaseRow& r) { return r.routed ? Cell{r.spec.routing.ratio} : Cell{}; });
  t.add({"coverage", "cov.groups", 3},
        [](const CaseRow& r) { return r.routed && r.plan ? Cell{r.plan->coverage.groups()} : Cell{}; });
  return t;
}

TableLayout<CaseRow> tile_coverage_columns() {
  TableLayout<CaseRow> t;
  t.add({"coverage_tiles", "cov.tiles", 3},
        [](const CaseRow& r) { return r.routed && r.plan ? Cell{r.plan->coverage.tiles()} : Cell{}; });
  t.add({"coverage_cells", "cov.cells", 3},
        [](const CaseRow& r) { return r.routed && r.plan ? Cell{r.plan->coverage.cells()} : Cell{}; });
  return t;
}

TableLayout<CaseRow> params_column() {
  TableLayout<CaseRow> t;
  t.add({"params", "params"},
        [](const CaseRow& r) { return r.routed && r.plan ? Cell{params_text(*r.plan)} : Cell{}; });
  return t;
}

TableLayout<CaseRow> head_columns() {
  TableLayout<CaseRow> t;
  t.add({"batch", "B"}, [](const CaseRow& r) -> Cell { return int64_t{r.spec.shape.batch()}; });
  t.add({"hq", "Hq"}, [](const CaseRow& r) -> Cell { return int64_t{r.spec.shape.hq}; });
  t.add({"hk", "Hk"}, [](const CaseRow& r) -> Cell { return int64_t{r.spec.shape.hk}; });
  t.add({"d", "d"}, [](const CaseRow& r) -> Cell { return int64_t{r.spec.shape.d}; });
  return t;
}

// case method layout ratio coverage coverage_tiles coverage_cells params batch hq hk d lq lk
// causal mode state accum smooth_k pv: shared by the prefill, model and emulator tables.
TableLayout<CaseRow> prefill_case_columns() {
  TableLayout<CaseRow> t;
  t.add(case_and_method_columns()).add(routing_columns()).add(tile_coverage_columns()).add(params_column());
  t.add(head_columns());
  t.add({"lq", "Lq"},
        [](const CaseRow& r) -> Cell { return equal_or_minus_one(sequence_lengths(r.spec.shape.cu_seqlens_q)); });
  t.add({"lk", "Lk"},
        [](const CaseRow& r) -> Cell { return equal_or_minus_one(sequence_lengths(r.spec.shape.cu_seqlens_k)); });
  t.add({"causal", "causal"}, [](const CaseRow& r) -> Cell { return r.spec.shape.causal; });
  t.add({"mode", "mode"},
        [](const CaseRow& r) { return r.routed ? Cell{std::string(to_string(r.spec.numerics.mode))} : Cell{}; });
  t.add({"state", "state"}, [](const CaseRow& r) -> Cell { return std::string(to_string(r.spec.numerics.state)); });
  t.add({"accum", "accum"}, [](const CaseRow& r) -> Cell { return std::string(to_string(r.spec.numerics.accum)); });
  t.add({"smooth_k", "smooth_k"}, [](const CaseRow& r) { return r.routed ? Cell{r.spec.numerics.smooth_k} : Cell{}; });
  t.add({"pv", "pv"},
        [](const CaseRow& r) { return r.routed ? Cell{std::string(to_string(r.spec.numerics.pv))} : Cell{}; });
  return t;
}

// ---- A GPU row's measurement ----

TableLayout<GpuMeasurement> timing_columns() {
  TableLayout<GpuMeasurement> t;
  t.add({"median_ms", "median ms", 4},
        [](const GpuMeasurement& m) { return m.timing ? Cell{m.timing->median_ms} : Cell{}; });
  t.add({"min_ms", "min ms", 4}, [](const GpuMeasurement& m) { return m.timing ? Cell{m.timing->min_ms} : Cell{}; });
  t.add({"max_ms", "max ms", 4}, [](const GpuMeasurement& m) { return m.timing ? Cell{m.timing->max_ms} : Cell{}; });
  t.add({"rel_std", "rel.std", 2}, [](const GpuMeasurement& m) { return m.timing ? Cell{m.timing->rel_std} : Cell{}; });
  t.add({"reps", "reps"},
        [](const GpuMeasurement& m) { return m.timing ? Cell{static_cast<int64_t>(m.timing->ms.size())} : Cell{}; });
  return t;
}

TableLayout<std::optional<Residency>> residency_columns() {
  TableLayout<std::optional<Residency>> t;
  t.add({"resident_mib", "HBM MiB", 4},
        [](const std::optional<Residency>& r) { return r ? Cell{mib(r->allocated)} : Cell{}; });
  t.add({"resident_measured_mib", "HBM MiB meas.", 4},
        [](const std::optional<Residency>& r) { return r ? Cell{mib(r->measured)} : Cell{}; });
  return t;
}

// The last columns of a GPU row: the SM clock after the timing, the device and the status.
TableLayout<GpuMeasurement> device_columns() {
  TableLayout<GpuMeasurement> t;
  t.add({"sm_clock_mhz", "SM MHz"}, [](const GpuMeasurement& m) {
    return m.timing ? Cell{static_cast<int64_t>(m.timing->sm_clock_end_mhz)} : Cell{};
  });
  t.add({"gpu", "gpu"}, [](const GpuMeasurement& m) -> Cell { return int64_t{m.device}; });
  t.add({"status", "status"}, [](const GpuMeasurement& m) -> Cell { return m.status; });
  return t;
}

// The deviation of a row from its case's compare_with run.
TableLayout<std::optional<ComparedDeviation>> comparison_columns() {
  using Compared = std::optional<ComparedDeviation>;
  const auto metric = [](double Deviation::*field) {
    return [field](const Compared& c) { return c && c->deviation ? Cell{(*c->deviation).*field} : Cell{}; };
  };
  TableLayout<Compared> t;
  t.add({"compared_with", "compared with"}, [](const Compared& c) { return c ? Cell{c->with} : Cell{}; });
  t.add({"max_abs_vs_compared", "max|d| cmp", 3}, metric(&Deviation::max_abs));
  t.add({"mean_abs_vs_compared", "mean|d| cmp", 3}, metric(&Deviation::mean_abs));
  t.add({"rel_l2_vs_compared", "rel.L2 cmp", 3}, metric(&Deviation::rel_l2));
  return t;
}

// `base`'s median over `timing`'s; empty unless both ran.
Cell speedup(const gpu::TimingResult* base, const gpu::TimingResult* timing) {
  return base && timing ? Cell{base->median_ms / timing->median_ms} : Cell{};
}

TableLayout<PrefillGpuRow> make_prefill_gpu_table(bool with_comparison) {
  using Row = PrefillGpuRow;
  TableLayout<Row> t;
  t.add(prefill_case_columns(), &Row::what);
  t.add(timing_columns(), &Row::measured);
  t.add({"tops", "TOPS", 4}, [](const Row& r) {
    return r.measured.timing ? Cell{r.ops / (r.measured.timing->median_ms * 1e-3) / 1e12} : Cell{};
  });
  t.add({"thpt_ktok_s", "K tok/s", 4}, [](const Row& r) {
    return r.measured.timing ? Cell{r.tokens / (r.measured.timing->median_ms * 1e-3) / 1e3} : Cell{};
  });
  t.add({"speedup_vs_flash", "x flash", 3}, [](const Row& r) { return speedup(r.flash, r.measured.timing); });
  t.add({"route_ms", "route ms", 4}, [](const Row& r) { return r.route ? Cell{r.route->median_ms} : Cell{}; });
  t.add({"quant_ms", "quant ms", 4}, [](const Row& r) { return optional_cell(r.quant_ms); });
  t.add(residency_columns(), [](const Row& r) { return std::optional<Residency>(r.resident); });
  t.add({"rel_l2_vs_flash", "rel.L2 flash", 3}, [](const Row& r) { return optional_cell(r.rel_l2_vs_flash); });
  t.add({"rel_l2_vs_ref", "rel.L2 ref", 3}, [](const Row& r) { return optional_cell(r.rel_l2_vs_ref); });
  if (with_comparison) t.add(comparison_columns(), &Row::compared);
  t.add(device_columns(), &Row::measured);
  return t;
}

TableLayout<DecodeGpuRow> make_decode_gpu_table() {
  using Row = DecodeGpuRow;
  TableLayout<Row> t;
  t.add(case_and_method_columns(), &Row::what);
  t.add({"cache_dtype", "cache"}, [](const Row& r) -> Cell { return std::string(to_string(r.cache)); });
  t.add(routing_columns(), &Row::what).add(params_column(), &Row::what).add(head_columns(), &Row::what);
  t.add({"cache_len", "L"},
        [](const Row& r) -> Cell { return equal_or_minus_one(r.what.spec.decode->shape.cache_len); });
  t.add({"new_tokens", "new"},
        [](const Row& r) -> Cell { return equal_or_minus_one(r.what.spec.decode->shape.new_tokens); });
  t.add({"mainloop", "mainloop"}, [](const Row& r) -> Cell { return r.mainloop; });
  t.add({"routes", "routes"}, [](const Row& r) { return r.routes.empty() ? Cell{} : Cell{r.routes}; });
  t.add({"combine", "combine"}, [](const Row& r) { return r.combine.empty() ? Cell{} : Cell{r.combine}; });
  t.add({"splits", "splits"}, [](const Row& r) { return r.measured.timing ? Cell{r.splits} : Cell{}; });
  t.add(timing_columns(), &Row::measured);
  const auto gbps = [](const Row& r) {
    return static_cast<double>(r.bytes_moved) / (r.measured.timing->median_ms * 1e-3) / 1e9;
  };
  t.add({"gbps", "GB/s", 4}, [gbps](const Row& r) { return r.measured.timing ? Cell{gbps(r)} : Cell{}; });
  t.add({"copy_gbps", "copy GB/s", 4}, [](const Row& r) -> Cell { return r.copy_gbps; });
  t.add({"pct_of_copy", "% copy", 3},
        [gbps](const Row& r) { return r.measured.timing ? Cell{100.0 * gbps(r) / r.copy_gbps} : Cell{}; });
  t.add({"speedup_vs_fp16_cache", "x fp16 cache", 3},
        [](const Row& r) { return speedup(r.fp16_cache, r.measured.timing); });
  t.add({"append_ms", "append ms", 4},
        [](const Row& r) { return r.measured.timing ? Cell{r.append->median_ms} : Cell{}; });
  t.add(residency_columns(),
        [](const Row& r) { return r.measured.timing ? std::optional<Residency>(r.resident) : std::nullopt; });
  t.add(device_columns(), &Row::measured);
  return t;
}

TableLayout<ModelRow> make_model_table() {
  using Row = ModelRow;
  TableLayout<Row> t;
  t.add(prefill_case_columns(), &Row::what);
  t.add({"layers", "layers"}, [](const Row& r) -> Cell { return int64_t{r.what.spec.model->layers}; });
  t.add({"vocab", "vocab"}, [](const Row& r) -> Cell { return int64_t{r.what.spec.model->vocab}; });
  t.add({"reference", "reference"}, [](const Row& r) -> Cell { return r.reference; });
  t.add({"max_abs_logit_ref", "max|logit| ref", 4},
        [](const Row& r) { return r.deviation ? Cell{r.deviation->reference_max_abs} : Cell{}; });
  t.add({"max_abs_dev", "max|dev|", 3}, [](const Row& r) { return r.deviation ? Cell{r.deviation->max_abs} : Cell{}; });
  t.add({"mean_abs_dev", "mean|dev|", 3},
        [](const Row& r) { return r.deviation ? Cell{r.deviation->mean_abs} : Cell{}; });
  t.add({"seconds", "seconds", 3}, [](const Row& r) { return optional_cell(r.seconds); });
  t.add({"status", "status"}, [](const Row& r) -> Cell { return r.status; });
  return t;
}

TableLayout<EmulatorRow> make_emulator_table(bool with_comparison) {
  using Row = EmulatorRow;
  TableLayout<Row> t;
  t.add(prefill_case_columns(), &Row::what);
  t.add({"cpu_ms", "cpu ms", 4}, [](const Row& r) -> Cell { return r.cpu_ms; });
  t.add({"max_abs_vs_ref", "max|d| ref", 3}, [](const Row& r) -> Cell { return r.vs_reference.max_abs; });
  t.add({"rel_l2_vs_ref", "rel.L2 ref", 3}, [](const Row& r) -> Cell { return r.vs_reference.rel_l2; });
  t.add({"cosine_vs_ref", "cos ref", 7}, [](const Row& r) -> Cell { return r.vs_reference.cosine; });
  if (with_comparison) t.add(comparison_columns(), &Row::compared);
  // Heavy-hitter exposure E^tau (paper G.5) with importance = attention probability P:
  // the paper's gradient-weighted importance needs a model loss, which a kernel bench has not.
  t.add({"hh_exposure", "hh INT8 5/10/20/30%"}, [](const Row& r) -> Cell {
    const std::vector<double>& e = r.exposure.exposure;
    return fmt::format("{:.3f} {:.3f} {:.3f} {:.3f}", e[0], e[1], e[2], e[3]);
  });
  return t;
}

TableLayout<CheckRow> make_check_table() {
  using Row = CheckRow;
  TableLayout<Row> t;
  t.add({"case", "case"}, [](const Row& r) -> Cell { return r.checked.spec.name; });
  t.add({"layout", "layout"},
        [](const Row& r) -> Cell { return std::string(to_string(r.checked.spec.routing.layout)); });
  t.add({"ratio", "ratio", 3}, [](const Row& r) -> Cell { return r.checked.spec.routing.ratio; });
  t.add({"coverage_groups", "cov.groups", 3}, [](const Row& r) -> Cell { return r.checked.coverage.groups(); });
  t.add({"coverage_tiles", "cov.tiles", 3}, [](const Row& r) -> Cell { return r.checked.coverage.tiles(); });
  t.add({"coverage_cells", "cov.cells", 3}, [](const Row& r) -> Cell { return r.checked.coverage.cells(); });
  t.add({"shape", "shape"}, [](const Row& r) -> Cell { return r.checked.shape; });
  t.add({"input", "input"}, [](const Row& r) -> Cell {
    return fmt::format("{} {}", to_string(r.checked.spec.input.kind), r.checked.spec.input.seed);
  });
  t.add({"state", "state"}, [](const Row& r) -> Cell { return r.checked.state; });
  t.add({"accum", "accum"}, [](const Row& r) -> Cell { return r.checked.accum; });
  t.add({"mode", "mode"}, [](const Row& r) -> Cell { return r.checked.mode; });
  t.add({"smooth_k", "smooth_k"}, [](const Row& r) { return r.checked.smooth_k ? Cell{*r.checked.smooth_k} : Cell{}; });
  t.add({"pv", "pv"}, [](const Row& r) { return r.checked.pv ? Cell{*r.checked.pv} : Cell{}; });
  t.add({"compare", "compare"}, [](const Row& r) -> Cell { return r.compare; });
  t.add({"max_abs", "max|d|", 3}, [](const Row& r) -> Cell { return r.deviation.max_abs; });
  t.add({"mean_abs", "mean|d|", 3}, [](const Row& r) -> Cell { return r.deviation.mean_abs; });
  t.add({"rel_l2", "rel.L2", 3}, [](const Row& r) -> Cell { return r.deviation.rel_l2; });
  t.add({"cosine", "cosine", 7}, [](const Row& r) -> Cell { return r.deviation.cosine; });
  t.add({"nonfinite", "nan/inf"}, [](const Row& r) -> Cell { return r.deviation.nonfinite; });
  t.add({"status", "status"}, [](const Row& r) -> Cell { return std::string(r.pass ? "pass" : "FAIL"); });
  t.add({"why", "why"}, [](const Row& r) -> Cell { return r.why; });
  return t;
}

}  // namespace

bool compares(const ExperimentConfig& config) {
  return std::any_of(config.cases.begin(), config.cases.end(),
                     [](const CaseSpec& spec) { return spec.compare_with.has_value(); });
}

const TableLayout<PrefillGpuRow>& prefill_gpu_table(bool with_comparison) {
  static const TableLayout<PrefillGpuRow> plain = make_prefill_gpu_table(false);
  static const TableLayout<PrefillGpuRow> compared = make_prefill_gpu_table(true);
  return with_comparison ? compared : plain;
}

const TableLayout<DecodeGpuRow>& decode_gpu_table() {
  static const TableLayout<DecodeGpuRow> t = make_decode_gpu_table();
  return t;
}

const TableLayout<ModelRow>& model_table() {
  static const TableLayout<ModelRow> t = make_model_table();
  return t;
}

const TableLayout<EmulatorRow>& emulator_table(bool with_comparison) {
  static const TableLayout<EmulatorRow> plain = make_emulator_table(false);
  static const TableLayout<EmulatorRow> compared = make_emulator_table(true);
  return with_comparison ? compared : plain;
}

const TableLayout<CheckRow>& check_table() {
  static const TableLayout<CheckRow> t = make_check_table();
  return t;
}

}  // namespace tilemix::app
