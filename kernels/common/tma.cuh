#pragma once
// Tensor-memory-accelerator (TMA) copies of sm_90: one thread issues a whole box of a tensor map
// (kernels/common/tensor_map.hpp builds it on the host) into shared memory, and the copy
// completes its bytes on an mbarrier (kernels/common/pipeline.cuh). The destination takes the
// tensor map's swizzle; for the 128-byte swizzle it must be 1024-byte aligned, and it then holds
// the layout of SwizzledTile<rows, 128> (the K-major operand layout of wgmma).
#include <cuda.h>

#include <cstdint>

#include "kernels/common/mma.cuh"

namespace tilemix::gpu {

// The box of `map` at coordinates (c0, c1, c2), innermost first, into `dst`; its bytes complete on
// `bar`. `map` must live in kernel parameter, constant or global memory (a __grid_constant__
// parameter's address is fine).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1,
                                            int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::
          "r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_address(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global `src` into shared `dst`,
// completing on `bar`: a plain copy, no tensor map.
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(smem_address(bar))
               : "memory");
}

// Fetches a tensor map's descriptor ahead of its first use.
__device__ __forceinline__ void tma_prefetch_descriptor(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

}  // namespace tilemix::gpu
