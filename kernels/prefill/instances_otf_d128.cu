// Compiled instances: head dimension 128, ScorePaths::routed_on_the_fly, fp16 PV accumulation (fp32
// accumulation runs the wgmma kernel, prefill_kernel_sm90.cu).
#include "kernels/prefill/instances_sm80.cuh"

namespace tilemix::gpu {

template void launch_prefill<128, ScorePaths::routed_on_the_fly, true>(const KernelParams&, const LaunchShape&, void*,
                                                         const std::string&);

}  // namespace tilemix::gpu
