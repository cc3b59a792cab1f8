#include "apps/check/check_runner.hpp"

#include <fmt/core.h>

#include <chrono>
#include <limits>
#include <random>

#include "apps/check/decode_checks.hpp"
#include "apps/common/decode_gpu.hpp"
#include "apps/common/gpu_problem.hpp"
#include "apps/common/prepared_case.hpp"
#include "apps/common/table_columns.hpp"
#include "core/error.hpp"
#include "core/metrics.hpp"
#include "reference/emulator.hpp"
#include "reference/exact.hpp"
#include "tilemix/attention.hpp"
#include "tilemix/gpu.hpp"

namespace tilemix::app {

const Tolerance& require_tolerance(const CaseSpec& spec, const Tolerance& t, const char* name) {
  if (t.empty()) {
    throw InputError(spec.where + ".tolerance." + name, "is required to check this case (set it in the case or defaults)");
  }
  return t;
}

void add_check_row(ResultTable& table, const CheckedCase& checked, const std::string& compare, const Deviation& dev,
                   const Tolerance& tol, bool& ok) {
  std::string why;
  const bool pass = within(dev, tol, &why);
  ok = ok && pass;
  table.add_row(check_table().cells({checked, compare, dev, pass, why}));
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
void check_prefill_case(const CaseSpec& spec, const DeviceChoice& device, const TileGeometry& geometry,
                        ResultTable& table, bool& ok) {
  const PreparedCase pc = prepare_case(spec, geometry);
  const ExactResult ref = exact_attention(spec.shape, pc.inputs);
  // ... and the softmax steps and score rounding of the mainloop the case runs on.
  EmulatorOptions options{spec.numerics, KeyOrder::ascending};
  if (device.gpu) {
    const PrefillEmulation emulation = gpu::prefill_emulation(
        gpu::tilemix_mainloop(spec.prefill_mainloop, spec.numerics, gpu::current_compute_capability()));
    options.softmax_tiles = emulation.softmax_tiles;
    options.fused_score_scale = emulation.fused_score_scale;
  }
  const EmulatorResult emu = emulate_attention(spec.shape, pc.inputs, pc.plan, options);
  const std::vector<double> emu_o = half_to_double(emu.o);

  const CheckedCase checked{spec,
                            pc.plan.coverage,
                            shape_summary(spec.shape),
                            to_string(spec.numerics.state),
                            to_string(spec.numerics.accum),
                            to_string(spec.numerics.mode),
                            spec.numerics.smooth_k,
                            std::string(to_string(spec.numerics.pv))};
  add_check_row(table, checked, "emulator~reference", deviation(emu_o, ref.o),
                require_tolerance(spec, spec.tolerance.emulator_vs_reference, "emulator_vs_reference"), ok);
  if (device.gpu) {
    // Outputs are poisoned (NaN) before the launch: an element the kernel misses fails the row.
    GpuProblem gpu_problem(spec.shape, pc.inputs);
    gpu_problem.set_mainloop(spec.prefill_mainloop);
    std::vector<double> gpu_o;
    try {
      gpu_o = half_to_double(gpu_problem.tilemix(pc.plan, spec.numerics).o);
    } catch (const std::invalid_argument& e) {
      // A kernel that refuses the case's numerics fails the case by name; the others still run.
      Deviation none;
      none.max_abs = none.mean_abs = none.rel_l2 = none.cosine = std::numeric_limits<double>::quiet_NaN();
      ok = false;
      table.add_row(check_table().cells({checked, "gpu~emulator", none, false, std::string("unavailable: ") + e.what()}));
      return;
    }
    add_check_row(table, checked, "gpu~emulator", deviation(gpu_o, emu_o),
                  require_tolerance(spec, spec.tolerance.gpu_vs_emulator, "gpu_vs_emulator"), ok);
    add_check_row(table, checked, "gpu~reference", deviation(gpu_o, ref.o),
                  require_tolerance(spec, spec.tolerance.gpu_vs_reference, "gpu_vs_reference"), ok);
  }
}

}  // namespace

CheckRun run_checks(const ExperimentConfig& config, const DeviceChoice& device, const std::string& filter) {
  CheckRun run;
  run.table = check_table().empty_table();
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
      const gpu::DeviceInfo info = device.gpu ? gpu::device_info(device.index) : gpu::DeviceInfo{};
      const DecodeTarget target = device.gpu ? DecodeTarget{info.sm_count, info.compute_capability()}
                                             : DecodeTarget{kCpuSmCount};
      run_case_within_host_memory(spec, decode_check_bytes(spec, target.sm_count, device.gpu), [&] {
        const DecodeCheck check = run_decode_check(spec, target, run.table, ok);
        if (!device.gpu) return;
        // Outputs and the split workspace are poisoned (NaN) before the launch.
        DecodeGpu decode(check.prepared, check.launch);
        const std::vector<double> gpu_o = half_to_double(decode.run().o);
        add_decode_row(run.table, spec, check, "gpu~emulator", deviation(gpu_o, check.emulator_o),
                       require_tolerance(spec, spec.tolerance.gpu_vs_emulator, "gpu_vs_emulator"), ok);
        add_decode_row(run.table, spec, check, "gpu~reference", deviation(gpu_o, check.reference.o),
                       require_tolerance(spec, spec.tolerance.gpu_vs_reference, "gpu_vs_reference"), ok);
      });
    } else {
      // On a GPU the plan and the emulator take the kernel's tile geometry.
      const TileGeometry geometry = device.gpu ? gpu::tilemix_geometry(spec.shape.d) : spec.routing.geometry;
      const PrefillWork work{true, true, false, device.gpu ? 1 : 0};
      run_case_within_host_memory(spec, prefill_case_bytes(spec, geometry, work),
                                  [&] { check_prefill_case(spec, device, geometry, run.table, ok); });
    }
    (ok ? run.passed : run.failed) += 1;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print(stderr, "[{}/{}] {} {} ({:.2f} s)\n", index, config.cases.size(), ok ? "pass" : "FAIL", spec.name, secs);
  }
  return run;
}

}  // namespace tilemix::app
