// Built when the CUDA kernels are not: every GPU entry point reports that the build has no CUDA.
#include <stdexcept>

#include "tilemix/gpu.hpp"

namespace tilemix::gpu {

bool built_with_cuda() { return false; }

int device_count(std::string* why) {
  if (why) *why = "this build has no CUDA kernels (configured with TILEMIX_CUDA=OFF or without nvcc)";
  return 0;
}

DeviceInfo device_info(int) { throw std::runtime_error("this build has no CUDA kernels"); }

}  // namespace tilemix::gpu
