// Compiled instances of the warp-specialized kernel: head dimension 64, tilemix with FP8 P V on every
// tile (pv fp8) and on the INT8-routed tiles (pv routed), both modes, fp32 accumulation.
#include "kernels/prefill/prefill_kernel_ws.cuh"

namespace tilemix::gpu {

#define TILEMIX_FP8PV_INSTANCE(paths, pv)                                                        \
  template void launch_prefill_ws<64, ScorePaths::paths, false, PvPaths::pv>(                   \
      const KernelParams&, const PrefillTensors&, const LaunchShape&, bool, void*, const std::string&)
TILEMIX_FP8PV_INSTANCE(routed_quantize_once, fp8);
TILEMIX_FP8PV_INSTANCE(routed_quantize_once, routed);
TILEMIX_FP8PV_INSTANCE(routed_on_the_fly, fp8);
TILEMIX_FP8PV_INSTANCE(routed_on_the_fly, routed);
#undef TILEMIX_FP8PV_INSTANCE

}  // namespace tilemix::gpu
