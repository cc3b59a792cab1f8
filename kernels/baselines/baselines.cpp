// Names, the out-of-memory error and the availability dispatch shared by all baselines.
#include <string>

#include "kernels/baselines/availability.hpp"
#include "tilemix/baselines.hpp"

namespace tilemix::gpu {

const char* baseline_name(Baseline b) {
  switch (b) {
    case Baseline::torch_like: return "torch_like";
    case Baseline::cudnn_fp16: return "cudnn_fp16";
    case Baseline::cudnn_fp8: return "cudnn_fp8";
  }
  return "unknown baseline";
}

OutOfMemory::OutOfMemory(const std::string& what, size_t bytes)
    : std::runtime_error("out of memory: " + what + " needs " + std::to_string(bytes) + " bytes"),
      bytes_asked(bytes) {}

bool baseline_available(Baseline b, const AttentionShape& shape, std::string* why) {
  switch (b) {
    case Baseline::torch_like: return torch_like_available(shape, why);
    case Baseline::cudnn_fp16:
    case Baseline::cudnn_fp8: return cudnn_available(b, shape, why);
  }
  if (why) *why = "unknown baseline " + std::to_string(static_cast<int>(b));
  return false;
}

}  // namespace tilemix::gpu
