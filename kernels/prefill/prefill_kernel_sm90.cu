// The prefill kernel on the wgmma mainloop (sm_90a). Instances: d = 128, fp32 P V accumulation,
// flash_fp16 and tilemix in both modes (the dispatch point sends d = 64 and fp16 accumulation to
// the sm_80 kernel).
#include <string>

#include "kernels/prefill/launch.hpp"
#include "kernels/prefill/mainloop_sm90.cuh"
#include "kernels/prefill/prefill_kernel.cuh"
#include "kernels/prefill/tile_sizes.hpp"

namespace tilemix::gpu {

template <ScorePaths kPaths>
void launch_prefill_sm90(const KernelParams& params, const LaunchShape& shape, void* stream,
                         const std::string& context) {
  using Cfg = PrefillConfigSm90<128>;
  launch_prefill_kernel<Cfg, MainloopSm90<Cfg, kPaths>, false>(params, shape, stream, context);
}

template void launch_prefill_sm90<ScorePaths::fp16>(const KernelParams&, const LaunchShape&, void*, const std::string&);
template void launch_prefill_sm90<ScorePaths::routed_quantize_once>(const KernelParams&, const LaunchShape&, void*,
                                                                     const std::string&);
template void launch_prefill_sm90<ScorePaths::routed_on_the_fly>(const KernelParams&, const LaunchShape&, void*,
                                                                  const std::string&);

}  // namespace tilemix::gpu
