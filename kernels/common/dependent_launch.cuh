#pragma once
// Programmatic dependent launch (sm_90): a kernel launched with the programmatic stream
// serialization attribute may start while the kernel before it on the stream still runs, once
// every CTA of that kernel has called allow_dependent_launch() or exited; it must call
// wait_for_prerequisite_grid() before reading what that kernel writes. Without the attribute
// both are no-ops, so a kernel can always call them; below sm_90 (no programmatic launch: the
// kernels run in stream order) they compile to nothing.
#include <cuda_runtime.h>

#include <string>

#include "kernels/common/check.cuh"

namespace tilemix::gpu {

__device__ __forceinline__ void allow_dependent_launch() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::);
#endif
}

// Waits for the prerequisite grid to complete, its memory operations visible.
__device__ __forceinline__ void wait_for_prerequisite_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Launches `kernel` as a programmatic dependent of the previous launch on `stream`.
template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
                      const std::string& context, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  TILEMIX_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), context);
}

}  // namespace tilemix::gpu
