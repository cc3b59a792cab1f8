#pragma once
// NVML, loaded at run time (the driver ships it; no link-time dependency): SM clocks for the
// timing rows and the driver version for provenance.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <string>

namespace tilemix::gpu {

// One process-wide handle; every query returns 0 or "" when NVML is missing.
class Nvml {
 public:
  Nvml() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) {
      note_ = "NVML not found";
      return;
    }
    init_ = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlInit_v2"));
    driver_ = reinterpret_cast<int (*)(char*, unsigned)>(dlsym(lib_, "nvmlSystemGetDriverVersion"));
    by_index_ = reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib_, "nvmlDeviceGetHandleByIndex_v2"));
    clock_ = reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(lib_, "nvmlDeviceGetClockInfo"));
    max_clock_ = reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(lib_, "nvmlDeviceGetMaxClockInfo"));
    if (!init_ || !by_index_ || !clock_ || !max_clock_ || init_() != 0) {
      note_ = "NVML unusable";
      lib_ = nullptr;
    }
  }
  // NVML clock type 1 = SM. Returns 0 when unreadable.
  int sm_mhz(bool max) {
    if (!lib_) return 0;
    int dev = 0;
    cudaGetDevice(&dev);
    void* handle = nullptr;
    unsigned mhz = 0;
    if (by_index_(static_cast<unsigned>(dev), &handle) != 0) return 0;
    if ((max ? max_clock_ : clock_)(handle, 1, &mhz) != 0) return 0;
    return static_cast<int>(mhz);
  }
  const std::string& note() const { return note_; }
  // "580.159.04", or "" when unreadable.
  std::string driver_version() {
    char text[96] = {0};
    if (!lib_ || !driver_ || driver_(text, sizeof text) != 0) return "";
    return text;
  }

 private:
  void* lib_ = nullptr;
  int (*init_)() = nullptr;
  int (*by_index_)(unsigned, void**) = nullptr;
  int (*clock_)(void*, int, unsigned*) = nullptr;
  int (*max_clock_)(void*, int, unsigned*) = nullptr;
  int (*driver_)(char*, unsigned) = nullptr;
  std::string note_;
};

inline Nvml& nvml() {
  static Nvml c;
  return c;
}

}  // namespace tilemix::gpu
