// gpu::fp8_mma_m64n64k32: one warpgroup, one wgmma_m64n64k32_e4m3_rs.
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "kernels/common/check.cuh"
#include "kernels/common/wgmma.cuh"
#include "tilemix/device_buffer.hpp"
#include "tilemix/fp8_mma.hpp"

namespace tilemix::gpu {
namespace {

__global__ void __launch_bounds__(128) fp8_mma_kernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
                                                      const float* __restrict__ c, float* __restrict__ d,
                                                      int accumulate) {
  // B as 64 K-major rows of 64 bytes in the 64-byte swizzle; the product reads bytes 0 .. 31.
  __shared__ __align__(1024) uint8_t b_tile[64 * 64];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  for (int i = tid; i < 64 * 64; i += 128) {
    const int row = i / 64, byte = i % 64;
    b_tile[sw64_offset(row, byte)] = byte < 32 ? b[row * 32 + byte] : 0;
  }
  fence_proxy_async_shared();
  __syncthreads();
  // The A fragment: rows 16 w + g (+ 8), bytes 4 t .. 4 t + 3 (+ 16).
  const auto word = [&](int row, int k0) { return *reinterpret_cast<const uint32_t*>(a + row * 32 + k0); };
  const int r0 = 16 * warp + g;
  const uint32_t frag[4] = {word(r0, 4 * t), word(r0 + 8, 4 * t), word(r0, 16 + 4 * t), word(r0 + 8, 16 + 4 * t)};
  float acc[32];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[4 * j + e] = c[(r0 + 8 * (e / 2)) * 64 + 8 * j + 2 * t + e % 2];
  }
  wgmma_fence();
  wgmma_m64n64k32_e4m3_rs(acc, frag, sw64_desc(static_cast<uint32_t>(__cvta_generic_to_shared(b_tile))), accumulate);
  wgmma_commit();
  wgmma_wait_all();
  wgmma_fence_operands(acc);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) d[(r0 + 8 * (e / 2)) * 64 + 8 * j + 2 * t + e % 2] = acc[4 * j + e];
  }
}

}  // namespace

std::vector<float> fp8_mma_m64n64k32(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                                     const std::vector<float>& c, bool accumulate) {
  if (a.size() != 64 * 32 || b.size() != 64 * 32 || c.size() != 64 * 64) {
    throw std::invalid_argument("fp8_mma_m64n64k32: A and B hold 64 x 32 codes, C 64 x 64 floats");
  }
  DeviceBuffer da = to_device(a), db = to_device(b), dc = to_device(c), dd(c.size() * sizeof(float));
  dd.poison();
  fp8_mma_kernel<<<1, 128>>>(da.as<const uint8_t>(), db.as<const uint8_t>(), dc.as<const float>(), dd.as<float>(),
                             accumulate ? 1 : 0);
  TILEMIX_LAUNCH_CHECK("fp8_mma_kernel", "fp8_mma_m64n64k32");
  device_synchronize("fp8_mma_m64n64k32");
  return to_host<float>(dd, c.size());
}

}  // namespace tilemix::gpu
