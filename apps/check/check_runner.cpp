#include "apps/check/check_runner.hpp"

#include <fmt/core.h>

#include <chrono>

#include "apps/common/prepared_case.hpp"
#include "core/error.hpp"
#include "core/metrics.hpp"
#include "reference/emulator.hpp"
#include "reference/exact.hpp"

namespace tilemix::app {
namespace {

ResultTable make_table() {
  ResultTable t;
  t.columns = {{"case", "case"},
               {"layout", "layout"},
               {"ratio", "ratio", 3},
               {"coverage_groups", "cov.groups", 3},
               {"coverage_tiles", "cov.tiles", 3},
               {"coverage_cells", "cov.cells", 3},
               {"shape", "shape"},
               {"state", "state"},
               {"accum", "accum"},
               {"mode", "mode"},
               {"compare", "compare"},
               {"max_abs", "max|d|", 3},
               {"mean_abs", "mean|d|", 3},
               {"rel_l2", "rel.L2", 3},
               {"cosine", "cosine", 7},
               {"nonfinite", "nan/inf"},
               {"status", "status"},
               {"why", "why"}};
  return t;
}

const Tolerance& require_tolerance(const CaseSpec& spec, const Tolerance& t, const char* name) {
  if (t.empty()) {
    throw InputError(spec.where + ".tolerance." + name, "is required to check this case (set it in the case or defaults)");
  }
  return t;
}

}  // namespace

CheckRun run_checks(const ExperimentConfig& config, const DeviceChoice& device, const std::string& filter) {
  CheckRun run;
  run.table = make_table();
  run.device = {{"kind", device.gpu ? "gpu" : "cpu"}};
  int index = 0;
  for (const CaseSpec& spec : config.cases) {
    ++index;
    if (!filter.empty() && spec.name.find(filter) == std::string::npos) continue;
    const auto t0 = std::chrono::steady_clock::now();
    const Tolerance& tol = require_tolerance(spec, spec.tolerance.emulator_vs_reference, "emulator_vs_reference");
    const PreparedCase pc = prepare_case(spec, spec.routing.geometry);
    const ExactResult ref = exact_attention(spec.shape, pc.inputs);
    const EmulatorResult emu = emulate_attention(spec.shape, pc.inputs, pc.plan, {spec.numerics, KeyOrder::ascending});

    const Deviation dev = deviation(half_to_double(emu.o), ref.o);
    std::string why;
    const bool ok = within(dev, tol, &why);
    const Coverage& cov = pc.plan.coverage;
    run.table.add_row({spec.name, std::string(to_string(spec.routing.layout)), spec.routing.ratio, cov.groups(),
                       cov.tiles(), cov.cells(), shape_summary(spec.shape), std::string(to_string(spec.numerics.state)),
                       std::string(to_string(spec.numerics.accum)), std::string(to_string(spec.numerics.mode)),
                       std::string("emulator~reference"), dev.max_abs, dev.mean_abs, dev.rel_l2, dev.cosine,
                       dev.nonfinite, std::string(ok ? "pass" : "FAIL"), why});
    (ok ? run.passed : run.failed) += 1;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print(stderr, "[{}/{}] {} {} ({:.2f} s)\n", index, config.cases.size(), ok ? "pass" : "FAIL", spec.name, secs);
  }
  return run;
}

}  // namespace tilemix::app
