// Seeded pseudo-random FP16 values on the device, for bench caches too large to generate on the
// host: element i depends only on (seed, i), so the values do not depend on the launch shape.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/common/check.cuh"
#include "tilemix/decode.hpp"

namespace tilemix::gpu {
namespace {

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Box-Muller on two 24-bit uniforms of one hash: values i and i + 1 of a pair.
__global__ void fill_random_kernel(__half* x, int64_t count, uint64_t seed, float stddev) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x * 2;
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 2; i < count; i += stride) {
    const uint64_t h = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(i)));
    const float u1 = (static_cast<float>(h >> 40) + 1.0f) * 0x1p-24f;  // (0, 1]
    const float u2 = static_cast<float>((h >> 16) & 0xffffffull) * 0x1p-24f;
    const float r = stddev * sqrtf(-2.0f * logf(u1));
    float s, c;
    sincospif(2.0f * u2, &s, &c);
    x[i] = __float2half_rn(r * c);
    if (i + 1 < count) x[i + 1] = __float2half_rn(r * s);
  }
}

}  // namespace

void fill_random_fp16(void* x, int64_t count, uint64_t seed, float stddev, void* stream) {
  const std::string context = "fill_random_fp16(count=" + std::to_string(count) + ")";
  if (count < 0) throw std::invalid_argument(context + ": negative count");
  if (count == 0) return;
  if (x == nullptr) throw std::invalid_argument(context + ": x must be a device pointer");
  const int64_t pairs = (count + 1) / 2;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((pairs + 255) / 256, 4096));
  fill_random_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<__half*>(x), count, seed,
                                                                             stddev);
  TILEMIX_LAUNCH_CHECK("fill_random_kernel", context);
}

}  // namespace tilemix::gpu
