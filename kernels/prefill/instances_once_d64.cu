// Compiled instances: head dimension 64, ScorePaths::routed_quantize_once, fp32 and fp16 PV accumulation.
#include "kernels/prefill/instances_sm80.cuh"

namespace tilemix::gpu {

template void launch_prefill<64, ScorePaths::routed_quantize_once, false>(const KernelParams&, const LaunchShape&, void*,
                                                          const std::string&);
template void launch_prefill<64, ScorePaths::routed_quantize_once, true>(const KernelParams&, const LaunchShape&, void*,
                                                         const std::string&);

}  // namespace tilemix::gpu
