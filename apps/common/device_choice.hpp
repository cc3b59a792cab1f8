#pragma once
// --device auto|cpu|gpu: where kernels run. auto falls back to the CPU with a visible note.
#include <string>

namespace tilemix::app {

struct DeviceChoice {
  bool gpu = false;
  int index = 0;
  std::string note;  // printed to stderr when non-empty (e.g. why the CPU is used)
};

// Throws InputError for an unknown value, or for `gpu` when no GPU is usable.
DeviceChoice choose_device(const std::string& requested);

}  // namespace tilemix::app
