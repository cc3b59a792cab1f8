#pragma once
// Synchronization of warp-specialized kernels (sm_90): shared-memory mbarriers (arrival counts
// plus transaction bytes, completed in phases of alternating parity), a ring of stages over them
// (StagePipeline), named barriers over a subset of a CTA's warps (and WarpgroupTurns over two of
// them), and the register reallocation between warpgroups.
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

// A ring of kStages buffers that a producer fills and consumers read, as one role walks it: the
// stage and phase parity of its current pass (pass k uses stage k % kStages with parity
// (k / kStages) & 1) and the stages' mbarriers. Every role keeps its own StagePipeline over the
// same barriers and walks the same passes, calling advance() after each.
//   producer: acquire() waits until the stage is empty (every consumer released the previous
//     pass's), then commit(bytes) arrives with the bytes its copies will bring, and the copies
//     complete on landing();
//   consumer: wait() until the stage is full, read it, release() (or release_by_warp).
// `empty` reports a fresh barrier's phase before its first as completed, so the first pass over
// the ring does not wait. kTransformed: the stage is rewritten between landing and consumption
// (on-chip quantization): the copies complete `loaded`, the transforming warps wait_landed(),
// write, then commit_by_warp() on `full`, for which the consumers wait.
template <int kStages, class Barriers>
class StagePipeline {
 public:
  static constexpr bool kTransformed = Barriers::kTransformed;
  __device__ __forceinline__ explicit StagePipeline(uint64_t* barriers) : barriers_(barriers) {}

  __device__ __forceinline__ int stage() const { return stage_; }
  __device__ __forceinline__ void advance() {
    if constexpr (kStages == 1) {
      parity_ ^= 1u;
    } else if (++stage_ == kStages) {
      stage_ = 0;
      parity_ ^= 1u;
    }
  }

  __device__ __forceinline__ void acquire() const { mbarrier_wait(barrier(Barriers::kEmpty), parity_ ^ 1u); }
  // The barrier this pass's copies complete.
  __device__ __forceinline__ uint64_t* landing() const {
    if constexpr (kTransformed) {
      return barrier(Barriers::kLoaded);
    } else {
      return barrier(Barriers::kFull);
    }
  }
  // The producer's one arrival, announcing the bytes of the copies that complete on landing().
  __device__ __forceinline__ void commit(unsigned bytes) const { mbarrier_arrive_expect_tx(landing(), bytes); }

  __device__ __forceinline__ void wait_landed() const {
    static_assert(kTransformed, "the copies complete `full` itself");
    mbarrier_wait(barrier(Barriers::kLoaded), parity_);
  }
  // A transforming warp's one arrival on `full`, after every lane's writes.
  __device__ __forceinline__ void commit_by_warp(int lane) const {
    static_assert(kTransformed, "the producer's commit completes `full`");
    __syncwarp();
    if (lane == 0) mbarrier_arrive(barrier(Barriers::kFull));
  }

  __device__ __forceinline__ void wait() const { mbarrier_wait(barrier(Barriers::kFull), parity_); }
  // One arrival toward `empty`: per thread, or with release_by_warp per warp after every lane's
  // reads (`empty` counts the arrivals of one or the other).
  __device__ __forceinline__ void release() const { mbarrier_arrive(barrier(Barriers::kEmpty)); }
  __device__ __forceinline__ void release_by_warp(int lane) const {
    __syncwarp();
    if (lane == 0) release();
  }

 private:
  __device__ __forceinline__ uint64_t* barrier(int first) const { return barriers_ + (first + stage_); }

  int stage_ = 0;
  unsigned parity_ = 0;
  uint64_t* barriers_;
};

// Barrier `id` (1..15; 0 is __syncthreads) over `threads` threads, a multiple of 32.
__device__ __forceinline__ void named_barrier_sync(unsigned id, unsigned threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Arrival at barrier `id` over `threads` threads without waiting: counts toward the threads that
// sync on it.
__device__ __forceinline__ void named_barrier_arrive(unsigned id, unsigned threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Two warpgroups (`wg` 0 and 1, kThreads threads together) taking turns at a section of code,
// such as issuing their products to the tensor cores, over named barriers kFirstBarrier + wg
// (warpgroup wg's turn): take() waits for the turn, pass() hands it to the other without waiting.
// Warpgroup 1 passes the first turn to warpgroup 0 (begin), and warpgroup 0 takes the last pass
// back (end), so that no arrival is left pending. Both must take the same number of turns.
// Without kEnabled every call is empty.
template <bool kEnabled, unsigned kFirstBarrier, unsigned kThreads>
struct WarpgroupTurns {
  int wg;
  __device__ __forceinline__ void take() const {
    if constexpr (kEnabled) named_barrier_sync(kFirstBarrier + wg, kThreads);
  }
  __device__ __forceinline__ void pass() const {
    if constexpr (kEnabled) named_barrier_arrive(kFirstBarrier + (wg ^ 1), kThreads);
  }
  __device__ __forceinline__ void begin() const {
    if (wg == 1) pass();
  }
  __device__ __forceinline__ void end() const {
    if (wg == 0) take();
  }
};

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
