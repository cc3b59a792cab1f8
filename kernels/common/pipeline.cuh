#pragma once
// Synchronization of warp-specialized kernels (sm_90): shared-memory mbarriers (arrival counts
// plus transaction bytes, completed in phases of alternating parity), named barriers over a subset
// of a CTA's warps, and the register reallocation between warpgroups.
//
// A ring of stages uses two barriers per stage. `full` completes when the stage's data landed
// (the producer's arrive with the expected bytes, then the copies' complete_tx); `empty` completes
// when every consumer released the stage. Pass k over the ring waits for phase parity k & 1 of
// `full`, and the producer for parity (k & 1) ^ 1 of `empty`, which a fresh barrier reports as
// completed (the phase before its first), so the first pass does not wait.
#include <cstdint>

#include "kernels/common/mma.cuh"

namespace tilemix::gpu {

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(arrivals) : "memory");
}

// Makes initialized barriers visible to the other threads and to the async (TMA) proxy.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival that also announces `bytes` of transactions (the copies that complete this phase).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(smem_address(bar)) : "memory");
}

// Blocks until the phase of parity `parity` has completed (acquire: what the arrivals released,
// and the bytes the transactions wrote, are visible afterwards).
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(smem_address(bar)),
      "r"(parity)
      : "memory");
}

// Barrier `id` (1..15; 0 is __syncthreads) over `threads` threads, a multiple of 32.
__device__ __forceinline__ void named_barrier_sync(unsigned id, unsigned threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Arrival at barrier `id` over `threads` threads without waiting: counts toward the threads that
// sync on it.
__device__ __forceinline__ void named_barrier_arrive(unsigned id, unsigned threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Register reallocation: every warp of a warpgroup executes the same one. A producer warpgroup
// gives registers back so that the consumer warpgroups may take them.
template <unsigned kRegisters>
__device__ __forceinline__ void warpgroup_release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <unsigned kRegisters>
__device__ __forceinline__ void warpgroup_claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// The warp index as a value the compiler knows to be uniform across the warp.
__device__ __forceinline__ int warp_index_uniform() { return __shfl_sync(0xffffffffu, threadIdx.x / 32, 0); }

}  // namespace tilemix::gpu
