#include "apps/check/check_runner.hpp"

#include <fmt/core.h>

#include <chrono>
#include <random>

#include "apps/check/decode_checks.hpp"
#include "apps/common/decode_gpu.hpp"
#include "apps/common/gpu_problem.hpp"
#include "apps/common/prepared_case.hpp"
#include "core/error.hpp"
#include "core/metrics.hpp"
#include "reference/emulator.hpp"
#include "reference/exact.hpp"
#include "tilemix/attention.hpp"
#include "tilemix/gpu.hpp"

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
               {"input", "input"},
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

}  // namespace

const Tolerance& require_tolerance(const CaseSpec& spec, const Tolerance& t, const char* name) {
  if (t.empty()) {
    throw InputError(spec.where + ".tolerance." + name, "is required to check this case (set it in the case or defaults)");
  }
  return t;
}

void draw_fresh_input_seeds(ExperimentConfig& config) {
  std::random_device entropy;
  for (CaseSpec& spec : config.cases) {
    if (spec.input.kind == InputKind::npy) continue;
    spec.input.seed = (static_cast<uint64_t>(entropy()) << 32) | entropy();
    spec.json["input"]["seed"] = spec.input.seed;
  }
}

namespace {

// The emulator (with the kernel's geometry on a GPU) against the reference, and on a GPU the
// routed kernel against both.
void check_prefill_case(const CaseSpec& spec, const DeviceChoice& device, ResultTable& table, bool& ok) {
  // On a GPU the plan and the emulator take the kernel's tile geometry.
  const TileGeometry geometry = device.gpu ? gpu::tilemix_geometry(spec.shape.d) : spec.routing.geometry;
  const PreparedCase pc = prepare_case(spec, geometry);
  const ExactResult ref = exact_attention(spec.shape, pc.inputs);
  const EmulatorResult emu = emulate_attention(spec.shape, pc.inputs, pc.plan, {spec.numerics, KeyOrder::ascending});
  const std::vector<double> emu_o = half_to_double(emu.o);

  const auto add_row = [&](const char* compare, const Deviation& dev, const Tolerance& tol) {
    std::string why;
    const bool row_ok = within(dev, tol, &why);
    ok = ok && row_ok;
    const Coverage& cov = pc.plan.coverage;
    table.add_row({spec.name, std::string(to_string(spec.routing.layout)), spec.routing.ratio, cov.groups(),
                   cov.tiles(), cov.cells(), shape_summary(spec.shape),
                   fmt::format("{} {}", to_string(spec.input.kind), spec.input.seed),
                   std::string(to_string(spec.numerics.state)), std::string(to_string(spec.numerics.accum)),
                   std::string(to_string(spec.numerics.mode)), std::string(compare), dev.max_abs, dev.mean_abs,
                   dev.rel_l2, dev.cosine, dev.nonfinite, std::string(row_ok ? "pass" : "FAIL"), why});
  };
  add_row("emulator~reference", deviation(emu_o, ref.o),
          require_tolerance(spec, spec.tolerance.emulator_vs_reference, "emulator_vs_reference"));
  if (device.gpu) {
    // Outputs are poisoned (NaN) before the launch: an element the kernel misses fails the row.
    GpuProblem gpu_problem(spec.shape, pc.inputs);
    const std::vector<double> gpu_o = half_to_double(gpu_problem.tilemix(pc.plan, spec.numerics).o);
    add_row("gpu~emulator", deviation(gpu_o, emu_o),
            require_tolerance(spec, spec.tolerance.gpu_vs_emulator, "gpu_vs_emulator"));
    add_row("gpu~reference", deviation(gpu_o, ref.o),
            require_tolerance(spec, spec.tolerance.gpu_vs_reference, "gpu_vs_reference"));
  }
}

}  // namespace

CheckRun run_checks(const ExperimentConfig& config, const DeviceChoice& device, const std::string& filter) {
  CheckRun run;
  run.table = make_table();
  run.device = device_provenance(device);
  if (device.gpu) gpu::select_device(device.index);
  for (const CaseSpec& spec : config.cases) {
    if (spec.model) {
      throw InputError(spec.where, "is a model case (\"kind\": \"model\"); tilemix-bench runs those");
    }
  }
  int index = 0;
  for (const CaseSpec& spec : config.cases) {
    ++index;
    if (!filter.empty() && spec.name.find(filter) == std::string::npos) continue;
    const auto t0 = std::chrono::steady_clock::now();
    bool ok = true;
    if (spec.decode) {
      const int sm_count = device.gpu ? gpu::device_info(device.index).sm_count : kCpuSmCount;
      const DecodeCheck check = run_decode_check(spec, sm_count, run.table, ok);
      if (device.gpu) {
        // Outputs and the split workspace are poisoned (NaN) before the launch.
        DecodeGpu decode(check.prepared, check.splits);
        decode.set_mainloop(spec.decode->mainloop);
        decode.set_combine_wait(spec.decode->combine);
        const std::vector<double> gpu_o = half_to_double(decode.run(spec.decode->cache).o);
        add_decode_row(run.table, spec, check, "gpu~emulator", deviation(gpu_o, check.emulator_o),
                       require_tolerance(spec, spec.tolerance.gpu_vs_emulator, "gpu_vs_emulator"), ok);
        add_decode_row(run.table, spec, check, "gpu~reference", deviation(gpu_o, check.reference.o),
                       require_tolerance(spec, spec.tolerance.gpu_vs_reference, "gpu_vs_reference"), ok);
      }
    } else {
      check_prefill_case(spec, device, run.table, ok);
    }
    (ok ? run.passed : run.failed) += 1;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print(stderr, "[{}/{}] {} {} ({:.2f} s)\n", index, config.cases.size(), ok ? "pass" : "FAIL", spec.name, secs);
  }
  return run;
}

}  // namespace tilemix::app
