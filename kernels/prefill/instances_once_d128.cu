// Compiled instances: head dimension 128, ScorePaths::routed_quantize_once, fp32 and fp16 P V
// accumulation on the mma.sync kernel (fp32 accumulation is `mainloop: mma_sync`, the kernel of
// GPUs other than sm_90; for `wgmma` the wgmma kernel, prefill_kernel_sm90.cu, runs it).
#include "kernels/prefill/instances_sm80.cuh"

namespace tilemix::gpu {

template void launch_prefill<128, ScorePaths::routed_quantize_once, false>(const KernelParams&, const LaunchShape&, void*,
                                                          const std::string&);
template void launch_prefill<128, ScorePaths::routed_quantize_once, true>(const KernelParams&, const LaunchShape&, void*,
                                                         const std::string&);

}  // namespace tilemix::gpu
