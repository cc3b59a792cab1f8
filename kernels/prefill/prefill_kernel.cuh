#pragma once
// The prefill kernel: one CTA per (query tile, query head, sequence). Composition only: block
// info, a mainloop (MainloopSm80: mma.sync; MainloopSm90: wgmma), the epilogue. Included by the
// instance files.
#include <cuda_runtime.h>

#include <string>

#include "kernels/common/check.cuh"
#include "kernels/prefill/accumulator.cuh"
#include "kernels/prefill/epilogue.cuh"
#include "kernels/prefill/launch.hpp"
#include "kernels/prefill/params.cuh"
#include "kernels/prefill/tile_sizes.hpp"

namespace tilemix::gpu {

template <class Cfg, class Mainloop, bool kAccumHalf>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSm)
    prefill_kernel(const __grid_constant__ KernelParams p) {
  extern __shared__ __align__(128) char smem_raw[];
  char* smem = Mainloop::Smem::align(smem_raw);
  BlockInfo blk;
  if (!blk.template init<Cfg::kBlockM, Cfg::kBlockN>(p)) return;
  typename Mainloop::Softmax softmax;
  softmax.init();
  OutputAccumulator<Cfg, kAccumHalf> o;
  o.zero();
  Mainloop::run(p, blk, smem, softmax, o);
  // Derived again (a few loads) instead of occupying registers through the mainloop.
  blk.template init<Cfg::kBlockM, Cfg::kBlockN>(p);
  Epilogue<Cfg, Mainloop::kRouted>::store(p, blk, softmax, o, smem);
}

template <class Cfg, class Mainloop, bool kAccumHalf>
void launch_prefill_kernel(const KernelParams& params, const LaunchShape& shape, void* stream,
                           const std::string& context) {
  constexpr int kSmemBytes = Mainloop::Smem::kAllocBytes;
  const auto kernel = prefill_kernel<Cfg, Mainloop, kAccumHalf>;
  TILEMIX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes), context);
  // Ask for the largest shared-memory carveout so that kMinBlocksPerSm CTAs fit on an SM.
  TILEMIX_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared),
      context);
  const dim3 grid(static_cast<unsigned>(shape.query_tiles), static_cast<unsigned>(shape.heads),
                  static_cast<unsigned>(shape.batch));
  kernel<<<grid, Cfg::kThreads, kSmemBytes, static_cast<cudaStream_t>(stream)>>>(params);
  cuda_check(cudaGetLastError(), Mainloop::kLaunchName,
             context + " grid=(" + std::to_string(grid.x) + "," + std::to_string(grid.y) + "," +
                 std::to_string(grid.z) + ") smem=" + std::to_string(kSmemBytes));
}

}  // namespace tilemix::gpu
