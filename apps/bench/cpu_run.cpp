#include "apps/bench/cpu_run.hpp"

#include <chrono>

#include "apps/common/prepared_case.hpp"
#include "apps/common/progress.hpp"
#include "apps/common/table_columns.hpp"
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

ResultTable run_emulator_bench(const ExperimentConfig& config, const std::string& dump_dir) {
  ResultTable table = emulator_table().empty_table();
  Progress progress(static_cast<int>(config.cases.size()));
  int index = 0;
  for (const CaseSpec& spec : config.cases) {
    progress.step(++index, spec.name);
    const PrefillWork work{true, true, true, 0};
    run_case_within_host_memory(spec, prefill_case_bytes(spec, spec.routing.geometry, work), [&] {
      const PreparedCase pc = prepare_case(spec, spec.routing.geometry);
      const auto t0 = std::chrono::steady_clock::now();
      const EmulatorResult emu =
          emulate_attention(spec.shape, pc.inputs, pc.plan, {spec.numerics, KeyOrder::ascending});
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const ExactResult ref = exact_attention(spec.shape, pc.inputs);
      const Deviation dev = deviation(half_to_double(emu.o), ref.o);
      const HeavyHitterExposure hh =
          heavy_hitter_exposure(spec.shape, pc.inputs, pc.plan, {0.05, 0.10, 0.20, 0.30});
      if (!dump_dir.empty()) dump_case(dump_dir, pc, emu, ref);
      table.add_row(emulator_table().cells({{spec, "emulator", true, &pc.plan}, ms, dev, hh}));
    });
  }
  progress.finish();
  return table;
}

}  // namespace tilemix::app
