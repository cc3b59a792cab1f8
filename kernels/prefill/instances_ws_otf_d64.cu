// Compiled instances of the warp-specialized kernel: head dimension 64, tilemix on_the_fly, fp32 and
// fp16 P V accumulation.
#include "kernels/prefill/prefill_kernel_ws.cuh"

namespace tilemix::gpu {

template void launch_prefill_ws<64, ScorePaths::routed_on_the_fly, false>(const KernelParams&, const PrefillTensors&,
                                                                          const LaunchShape&, bool, void*,
                                                                          const std::string&);
template void launch_prefill_ws<64, ScorePaths::routed_on_the_fly, true>(const KernelParams&, const PrefillTensors&,
                                                                         const LaunchShape&, bool, void*,
                                                                         const std::string&);

}  // namespace tilemix::gpu
