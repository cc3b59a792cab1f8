// Device discovery for the plain C++ API.
#include <cuda_runtime.h>

#include "kernels/common/check.cuh"
#include "kernels/common/nvml.cuh"
#include "tilemix/gpu.hpp"

namespace tilemix::gpu {

bool built_with_cuda() { return true; }

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why) *why = std::string("no usable CUDA device: ") + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky-free error state
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device present";
  return n;
}

DeviceInfo device_info(int index) {
  cudaDeviceProp p{};
  TILEMIX_CUDA_CHECK(cudaGetDeviceProperties(&p, index), "device " + std::to_string(index));
  DeviceInfo d;
  d.index = index;
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.global_mem_bytes = static_cast<int64_t>(p.totalGlobalMem);
  d.l2_bytes = p.l2CacheSize;
  int clock_khz = 0, mem_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, index);
  cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, index);
  d.sm_clock_mhz = clock_khz / 1000;
  d.mem_clock_mhz = mem_khz / 1000;
  TILEMIX_CUDA_CHECK(cudaDriverGetVersion(&d.driver_version), "driver version");
  d.driver = nvml().driver_version();
  TILEMIX_CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime_version), "runtime version");
  return d;
}

void select_device(int index) {
  TILEMIX_CUDA_CHECK(cudaSetDevice(index), "select device " + std::to_string(index));
}

ComputeCapability current_compute_capability() {
  int device = 0;
  ComputeCapability cc;
  TILEMIX_CUDA_CHECK(cudaGetDevice(&device), "current device");
  TILEMIX_CUDA_CHECK(cudaDeviceGetAttribute(&cc.major, cudaDevAttrComputeCapabilityMajor, device), "compute capability");
  TILEMIX_CUDA_CHECK(cudaDeviceGetAttribute(&cc.minor, cudaDevAttrComputeCapabilityMinor, device), "compute capability");
  return cc;
}

std::string current_device_name() {
  int device = 0;
  TILEMIX_CUDA_CHECK(cudaGetDevice(&device), "current device");
  return device_info(device).name + " (device " + std::to_string(device) + ")";
}

}  // namespace tilemix::gpu
