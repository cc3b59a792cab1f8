#pragma once
// Plain C++ view of the GPU side: device discovery. No CUDA types; apps/ and tests/ compile with g++.
#include <cstdint>
#include <string>
#include <vector>

#include "core/choices/compute_capability.hpp"

namespace tilemix::gpu {

struct DeviceInfo {
  int index = -1;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int64_t global_mem_bytes = 0;
  int64_t l2_bytes = 0;
  int sm_clock_mhz = 0;      // current SM clock where readable, else the nominal clock
  int mem_clock_mhz = 0;
  int driver_version = 0;    // CUDA version the driver supports, e.g. 13000
  std::string driver;        // the driver's own version, e.g. "580.159.04" ("" when unreadable)
  int runtime_version = 0;

  ComputeCapability compute_capability() const { return {cc_major, cc_minor}; }
};

// True when this build contains the CUDA kernels.
bool built_with_cuda();

// Number of usable CUDA devices; 0 with `why` filled when there are none (no CUDA build, no
// driver, no device).
int device_count(std::string* why = nullptr);

DeviceInfo device_info(int index);

// Makes `index` the current device of the calling thread.
void select_device(int index);

// The compute capability of the calling thread's current device (cheap: the kernels' dispatch
// reads it at every call).
ComputeCapability current_compute_capability();
// "NVIDIA A100-SXM4-40GB (device 0)": the current device, for errors.
std::string current_device_name();

}  // namespace tilemix::gpu
