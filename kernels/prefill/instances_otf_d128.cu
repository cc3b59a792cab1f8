// Compiled instances: head dimension 128, ScorePaths::routed_on_the_fly, fp32 and fp16 PV accumulation.
#include "kernels/prefill/instances_sm80.cuh"

namespace tilemix::gpu {

template void launch_prefill<128, ScorePaths::routed_on_the_fly, false>(const KernelParams&, const LaunchShape&, void*,
                                                          const std::string&);
template void launch_prefill<128, ScorePaths::routed_on_the_fly, true>(const KernelParams&, const LaunchShape&, void*,
                                                         const std::string&);

}  // namespace tilemix::gpu
