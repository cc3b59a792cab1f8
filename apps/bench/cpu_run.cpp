#include "apps/bench/cpu_run.hpp"

#include <fmt/format.h>

#include <chrono>

#include "apps/common/case_columns.hpp"
#include "apps/common/prepared_case.hpp"
#include "apps/common/progress.hpp"
#include "core/metrics.hpp"
#include "reference/emulator.hpp"
#include "reference/exact.hpp"

namespace tilemix::app {

const char* default_bench_config_json() {
  return R"json({
  "name": "default",
  "description": "Small built-in sweep: every layout at 50% INT8 coverage, B=1, Hq=8, Hk=2, d=128, L=1024",
  "defaults": {"batch": 1, "seq_len": 1024, "hq": 8, "hk": 2, "d": 128, "causal": true, "ratio": 0.5,
               "input": {"kind": "llm_like", "seed": 1}},
  "cases": [{"name": "zero", "layout": "zero"}, {"name": "one", "layout": "one"}, {"name": "band", "layout": "band"}, {"name": "global", "layout": "global"},
            {"name": "rowrand", "layout": "rowrand"}, {"name": "align_sparse", "layout": "align_sparse"}, {"name": "bigbird", "layout": "bigbird"}, {"name": "sptrans", "layout": "sptrans"}]
})json";
}

namespace {

ResultTable make_table() {
  ResultTable t;
  t.columns = case_columns();
  const std::vector<Column> own = {
      {"cpu_ms", "cpu ms", 4},
      {"max_abs_vs_ref", "max|d| ref", 3},
      {"rel_l2_vs_ref", "rel.L2 ref", 3},
      {"cosine_vs_ref", "cos ref", 7},
      // Heavy-hitter exposure E^tau (paper G.5) with importance = attention probability P:
      // the paper's gradient-weighted importance needs a model loss, which a kernel bench has not.
      {"hh_exposure", "hh INT8 5/10/20/30%"}};
  t.columns.insert(t.columns.end(), own.begin(), own.end());
  return t;
}

}  // namespace

ResultTable run_emulator_bench(const ExperimentConfig& config, const std::string& dump_dir) {
  ResultTable table = make_table();
  Progress progress(static_cast<int>(config.cases.size()));
  int index = 0;
  for (const CaseSpec& spec : config.cases) {
    progress.step(++index, spec.name);
    const PreparedCase pc = prepare_case(spec, spec.routing.geometry);
    const auto t0 = std::chrono::steady_clock::now();
    const EmulatorResult emu = emulate_attention(spec.shape, pc.inputs, pc.plan, {spec.numerics, KeyOrder::ascending});
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const ExactResult ref = exact_attention(spec.shape, pc.inputs);
    const Deviation dev = deviation(half_to_double(emu.o), ref.o);
    const HeavyHitterExposure hh = heavy_hitter_exposure(spec.shape, pc.inputs, pc.plan, {0.05, 0.10, 0.20, 0.30});
    if (!dump_dir.empty()) dump_case(dump_dir, pc, emu, ref);

    std::vector<Cell> row = case_cells(spec, pc.plan, "emulator", true);
    const std::vector<Cell> own = {ms, dev.max_abs, dev.rel_l2, dev.cosine,
                                   fmt::format("{:.3f} {:.3f} {:.3f} {:.3f}", hh.exposure[0], hh.exposure[1],
                                               hh.exposure[2], hh.exposure[3])};
    row.insert(row.end(), own.begin(), own.end());
    table.add_row(std::move(row));
  }
  progress.finish();
  return table;
}

}  // namespace tilemix::app
