// Compiled instances: head dimension 128, ScorePaths::routed_quantize_once, fp32 and fp16 PV accumulation.
#include "kernels/prefill/prefill_kernel.cuh"

namespace tilemix::gpu {

template void launch_prefill<128, ScorePaths::routed_quantize_once, false>(const KernelParams&, const LaunchShape&, void*,
                                                          const std::string&);
template void launch_prefill<128, ScorePaths::routed_quantize_once, true>(const KernelParams&, const LaunchShape&, void*,
                                                         const std::string&);

}  // namespace tilemix::gpu
