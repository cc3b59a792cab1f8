#pragma once
// --device auto|cpu|gpu: where kernels run. auto falls back to the CPU with a visible note.
#include <string>

#include <nlohmann/json.hpp>

namespace tilemix::app {

struct DeviceChoice {
  bool gpu = false;
  int index = 0;
  std::string note;  // printed to stderr when non-empty (e.g. why the CPU is used)
};

// Throws InputError for an unknown value, or for `gpu` when no GPU is usable.
DeviceChoice choose_device(const std::string& requested);

// What results record about where they ran: GPU name, SM count and clock, driver, CUDA runtime,
// cuDNN and cuBLAS versions (or {"kind": "cpu"}).
nlohmann::json device_provenance(const DeviceChoice& device);

}  // namespace tilemix::app
