// The prefill kernel on the wgmma mainloop (sm_90a): block info, MainloopSm90, the shared
// epilogue. Instances: d = 128, fp32 P V accumulation, flash_fp16 and tilemix quantize_once (the
// dispatch point sends the other configurations to the sm_80 kernel).
#include <cuda_runtime.h>

#include <string>

#include "kernels/common/check.cuh"
#include "kernels/prefill/accumulator.cuh"
#include "kernels/prefill/epilogue.cuh"
#include "kernels/prefill/launch.hpp"
#include "kernels/prefill/mainloop_sm90.cuh"
#include "kernels/prefill/params.cuh"
#include "kernels/prefill/tile_sizes.hpp"

namespace tilemix::gpu {
namespace {

template <class Cfg, ScorePaths kPaths>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSm)
    prefill_kernel_sm90(const __grid_constant__ KernelParams p) {
  using Mainloop = MainloopSm90<Cfg, kPaths>;
  extern __shared__ __align__(1024) char smem_raw[];
  char* smem = Mainloop::Smem::align(smem_raw);
  BlockInfo blk;
  if (!blk.template init<Cfg::kBlockM, Cfg::kBlockN>(p)) return;
  typename Mainloop::Softmax softmax;
  softmax.init();
  OutputAccumulator<Cfg, false> o;
  o.zero();
  Mainloop::run(p, blk, smem, softmax, o);
  blk.template init<Cfg::kBlockM, Cfg::kBlockN>(p);
  Epilogue<Cfg, Mainloop::kRouted>::store(p, blk, softmax, o, smem);
}

}  // namespace

template <ScorePaths kPaths>
void launch_prefill_sm90(const KernelParams& params, const LaunchShape& shape, void* stream,
                         const std::string& context) {
  using Cfg = PrefillConfigSm90<128>;
  constexpr int kSmemBytes = MainloopSm90<Cfg, kPaths>::Smem::kAllocBytes;
  const auto kernel = prefill_kernel_sm90<Cfg, kPaths>;
  TILEMIX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes), context);
  TILEMIX_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared),
      context);
  const dim3 grid(static_cast<unsigned>(shape.query_tiles), static_cast<unsigned>(shape.heads),
                  static_cast<unsigned>(shape.batch));
  kernel<<<grid, Cfg::kThreads, kSmemBytes, static_cast<cudaStream_t>(stream)>>>(params);
  TILEMIX_LAUNCH_CHECK("prefill_kernel_sm90", context + " grid=(" + std::to_string(grid.x) + "," +
                                                  std::to_string(grid.y) + "," + std::to_string(grid.z) +
                                                  ") smem=" + std::to_string(kSmemBytes));
}

template void launch_prefill_sm90<ScorePaths::fp16>(const KernelParams&, const LaunchShape&, void*, const std::string&);
template void launch_prefill_sm90<ScorePaths::routed_quantize_once>(const KernelParams&, const LaunchShape&, void*,
                                                                     const std::string&);

}  // namespace tilemix::gpu
