#pragma once
// Tensor-memory-accelerator loads (sm_90): a box of a global tensor (described by a CUtensorMap
// that lives in kernel parameter space) copied into shared memory by one thread, completing on an
// mbarrier. The copies run in the async proxy, like wgmma's operand reads, so a thread's
// fence.proxy.async for its own shared-memory stores does not wait for them (it does wait for the
// thread's cp.async, which write through the generic proxy).
#include <cuda.h>

#include <cstdint>

namespace tilemix::gpu {

__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}

// Makes initialized mbarriers visible to the other threads and to the TMA unit (a CTA barrier
// follows before anyone waits on them).
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// The calling thread's arrival, announcing `bytes` of copies that will complete on `bar`.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// Waits until the phase with parity `phase` of `bar` has completed.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t phase) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "TILEMIX_MBARRIER_WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra TILEMIX_MBARRIER_WAIT_%=;\n}\n" ::"r"(bar),
      "r"(phase)
      : "memory");
}

// The box at coordinates (c0, c1, c2) (innermost first) of a 3-D tensor into `dst`.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int c0, int c1, int c2,
                                           uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::
          "r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// The box at coordinate c0 of a 1-D tensor into `dst`.
__device__ __forceinline__ void tma_load_1d(uint32_t dst, const CUtensorMap* map, int c0, uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];\n" ::
                   "r"(dst),
               "l"(map), "r"(c0), "r"(bar)
               : "memory");
}

}  // namespace tilemix::gpu
