// Names, the out-of-memory error and the availability dispatch shared by all baselines.
#include <string>

#include "kernels/baselines/availability.hpp"
#include "tilemix/baselines.hpp"

namespace tilemix::gpu {

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
