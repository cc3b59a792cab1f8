#pragma once
// Every CUDA call and launch is checked; errors name the call and the shape/context.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace tilemix::gpu {

class CudaError : public std::runtime_error {
 public:
  CudaError(const char* call, cudaError_t err, const std::string& context)
      : std::runtime_error(std::string(call) + " failed: " + cudaGetErrorString(err) +
                           (context.empty() ? "" : " [" + context + "]")),
        code(err) {}
  cudaError_t code;
};

inline void cuda_check(cudaError_t err, const char* call, const std::string& context) {
  if (err != cudaSuccess) throw CudaError(call, err, context);
}

}  // namespace tilemix::gpu

#define TILEMIX_CUDA_CHECK(expr, context) ::tilemix::gpu::cuda_check((expr), #expr, (context))
// After a launch: configuration errors now, execution errors at the next synchronisation.
#define TILEMIX_LAUNCH_CHECK(name, context) \
  ::tilemix::gpu::cuda_check(cudaGetLastError(), "launch of " name, (context))
