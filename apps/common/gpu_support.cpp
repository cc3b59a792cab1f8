#include "apps/common/gpu_support.hpp"

#include <stdexcept>

#include "core/error.hpp"
#include "kernels/decode/plan.hpp"
#include "tilemix/attention.hpp"
#include "tilemix/gpu.hpp"

namespace tilemix::app {

namespace {

// The kernels' refusal (std::invalid_argument) as an InputError at the case's `mainloop`.
template <class Check>
void at_case_mainloop(const CaseSpec& spec, Check check) {
  try {
    check();
  } catch (const std::invalid_argument& e) {
    throw InputError(spec.where + ".mainloop", e.what());
  }
}

}  // namespace

void require_case_runs_on(const CaseSpec& spec, ComputeCapability cc, const std::string& gpu) {
  if (spec.decode) {
    at_case_mainloop(spec, [&] { require_decode_mainloop_runs(spec.decode->mainloop, cc, gpu); });
    return;
  }
  const PrefillMainloop tilemix = gpu::tilemix_mainloop(spec.prefill_mainloop, spec.numerics, cc);
  const PrefillMainloop flash = gpu::flash_mainloop(spec.prefill_mainloop, cc);
  for (const PrefillMainloop m : {tilemix, flash}) {
    at_case_mainloop(spec, [&] { gpu::require_prefill_mainloop_runs(m, cc, gpu); });
  }
  if (spec.numerics.pv != PvPrecision::fp16 && tilemix != PrefillMainloop::warp_specialized) {
    throw InputError(spec.where + ".pv", std::string(to_string(spec.numerics.pv)) +
                                             ": FP8 P V runs on the warp_specialized mainloop, built for sm_90a "
                                             "alone; " + gpu + " is sm_" + std::to_string(cc.sm()));
  }
}

void require_cases_run_on(const ExperimentConfig& config, const DeviceChoice& device) {
  if (!device.gpu) return;
  const gpu::DeviceInfo info = gpu::device_info(device.index);
  for (const CaseSpec& spec : config.cases) require_case_runs_on(spec, info.compute_capability(), info.name);
}

}  // namespace tilemix::app
