// Timing entry points of a build without CUDA: there is nothing to time.
#include <stdexcept>

#include "tilemix/timing.hpp"

namespace tilemix::gpu {

TimingResult time_launches(const std::function<void(int)>&, const TimingOptions&) {
  throw std::runtime_error("this build has no CUDA kernels");
}

double measure_copy_bandwidth_gbps(size_t) { throw std::runtime_error("this build has no CUDA kernels"); }

}  // namespace tilemix::gpu
