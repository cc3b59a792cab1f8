#pragma once
// Which cases a GPU can run, checked before any runs: the prefill mainloop a case asks for (or the
// one `auto` takes there) must be built for the GPU, and FP8 P V needs the warp-specialized
// kernel (sm_90a). Plain C++: the check is unit-tested with made-up compute capabilities.
#include <string>

#include "apps/common/device_choice.hpp"
#include "core/choices/compute_capability.hpp"
#include "core/config/experiment.hpp"

namespace tilemix::app {

// Throws InputError at the case's `mainloop` (or `pv`) naming `gpu`, its compute capability and
// the mainloop where the case's prefill calls (tilemix and flash_fp16, or a model's attention)
// cannot run on it, or where a decode case asks for the wgmma decode mainloop there.
void require_case_runs_on(const CaseSpec& spec, ComputeCapability cc, const std::string& gpu);

// Every case of `config` on the GPU of `device` (nothing on the CPU).
void require_cases_run_on(const ExperimentConfig& config, const DeviceChoice& device);

}  // namespace tilemix::app
