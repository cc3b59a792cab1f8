#pragma once
// launch_prefill: the prefill kernel on the sm_80 mainloop, for the instance files.
#include <string>

#include "kernels/prefill/mainloop_sm80.cuh"
#include "kernels/prefill/prefill_kernel.cuh"

namespace tilemix::gpu {

template <int kHeadDim, ScorePaths kPaths, bool kAccumHalf>
void launch_prefill(const KernelParams& params, const LaunchShape& shape, void* stream, const std::string& context) {
  using Cfg = PrefillConfig<kHeadDim>;
  launch_prefill_kernel<Cfg, MainloopSm80<Cfg, kPaths>, kAccumHalf>(params, shape, stream, context);
}

}  // namespace tilemix::gpu
