// Compiled instance: head dimension 128, ScorePaths::fp16, fp16 PV accumulation (with fp32
// accumulation this configuration runs the wgmma kernel, prefill_kernel_sm90.cu).
#include "kernels/prefill/instances_sm80.cuh"

namespace tilemix::gpu {

template void launch_prefill<128, ScorePaths::fp16, true>(const KernelParams&, const LaunchShape&, void*,
                                                         const std::string&);

}  // namespace tilemix::gpu
