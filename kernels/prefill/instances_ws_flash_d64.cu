// Compiled instances of the warp-specialized kernel: head dimension 64, flash_fp16, fp32 and fp16
// P V accumulation.
#include "kernels/prefill/prefill_kernel_ws.cuh"

namespace tilemix::gpu {

template void launch_prefill_ws<64, ScorePaths::fp16, false>(const KernelParams&, const PrefillTensors&,
                                                              const LaunchShape&, bool, void*, const std::string&);
template void launch_prefill_ws<64, ScorePaths::fp16, true>(const KernelParams&, const PrefillTensors&,
                                                             const LaunchShape&, bool, void*, const std::string&);

}  // namespace tilemix::gpu
