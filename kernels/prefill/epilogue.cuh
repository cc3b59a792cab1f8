#pragma once
// Final normalization and stores: o = fp16(O * (1 / l)), the reciprocal and the product each
// rounded to fp32 (the emulator's rounding points; one reciprocal per row instead of a correctly
// rounded division per element, which took 63% of the warp-specialized kernel's epilogue), zeros
// for a row with l == 0, staged through shared memory so that every global store is a coalesced
// 16-byte vector (EpilogueDirect: straight from registers); LSE = (m + log2 l) * ln 2 (-inf for
// l == 0) when requested.
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/mma.cuh"
#include "kernels/prefill/params.cuh"
#include "kernels/prefill/smem_layout.cuh"

namespace tilemix::gpu {

// Two outputs of a row: fp16(O * inv_l) with inv_l = 1 / l rounded, or zeros for a row with
// l == 0 (no key: its O may hold 0 * inf from values that are not finite).
__device__ __forceinline__ __half2 normalized(float2 acc, float l, float inv_l) {
  return l == 0.0f ? __float2half2_rn(0.0f) : __floats2half2_rn(__fmul_rn(acc.x, inv_l), __fmul_rn(acc.y, inv_l));
}

template <class Cfg, bool kRouted>
struct Epilogue {
  using Smem = PrefillSmem<Cfg, kRouted>;
  using OTile = typename Smem::OTile;

  template <class Softmax, class Acc>
  __device__ __forceinline__ static void store(const KernelParams& p, const BlockInfo& blk, const Softmax& softmax,
                                               const Acc& o, char* smem) {
    constexpr int D = Cfg::kHeadDim;
    constexpr float kLn2 = 0.69314718055994530942f;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    // No copy is still landing in shared memory, and every warp has finished reading Q.
    cp_async_wait<0>();
    __syncthreads();
    char* o_tile = smem + Smem::kQ;
    const int64_t q_token0 = blk.q_token0<Cfg::kBlockM>(p);

#pragma unroll
    for (int mi = 0; mi < Cfg::kRowSlices; ++mi) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = mi * 2 + half;
        const int row = warp * Cfg::kWarpRows + mi * 16 + half * 8 + (lane >> 2);
        const float l = softmax.row_sum[r];
        const float inv_l = __frcp_rn(l);
#pragma unroll
        for (int ni = 0; ni < Cfg::kDimFrags; ++ni) {
          const __half2 h = normalized(o.pair(mi, ni, half * 2), l, inv_l);
          // Fragment ni covers output columns 8*ni .. 8*ni+7: one 16-byte chunk of the row.
          *reinterpret_cast<__half2*>(o_tile + OTile::offset(row, ni) + (lane & 3) * 4) = h;
        }
        if (p.lse != nullptr && (lane & 3) == 0 && row < blk.rows) {
          const float lse = l == 0.0f ? -INFINITY : __fmul_rn(__fadd_rn(softmax.row_max[r], log2f(l)), kLn2);
          p.lse[static_cast<int64_t>(blk.h) * p.total_q + q_token0 + row] = lse;
        }
      }
    }
    __syncthreads();

    char* o_head = reinterpret_cast<char*>(p.o + (q_token0 * p.hq * D + static_cast<int64_t>(blk.h) * D));
    constexpr int kRowsPerPass = Cfg::kThreads / OTile::kChunksPerRow;
    static_assert(kRowsPerPass % OTile::kRowPeriod == 0, "passes keep the swizzle phase");
    const int row0 = tid / OTile::kChunksPerRow, chunk = tid % OTile::kChunksPerRow;
    const char* src = o_tile + OTile::offset(row0, chunk);
    char* dst = o_head + row0 * p.q_row_bytes + chunk * 16;
#pragma unroll
    for (int i = 0; i < OTile::kRows / kRowsPerPass; ++i) {
      if (row0 + i * kRowsPerPass < blk.rows) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src + i * kRowsPerPass * OTile::kRowBytes);
      }
      dst += kRowsPerPass * p.q_row_bytes;
    }
  }
};

// The warp-specialized kernel's epilogue: each consumer warp stores its own 16 rows straight from
// the accumulator (4-byte stores, a quad of lanes covering 16 bytes of a row), so that no shared
// memory is needed and the next work tile's Q may already be landing.
template <class Cfg>
struct EpilogueDirect {
  template <class Softmax, class Acc>
  __device__ __forceinline__ static void store_direct(const KernelParams& p, const BlockInfo& blk,
                                                      const Softmax& softmax, const Acc& o, int warp, int lane) {
    constexpr int D = Cfg::kHeadDim;
    constexpr float kLn2 = 0.69314718055994530942f;
    const int64_t q_token0 = blk.q_token0<Cfg::kBlockM>(p);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp * Cfg::kWarpRows + half * 8 + (lane >> 2);
      if (row >= blk.rows) continue;
      const float l = softmax.row_sum[half];
      const float inv_l = __frcp_rn(l);
      __half* out = p.o + (q_token0 + row) * p.hq * D + static_cast<int64_t>(blk.h) * D + 2 * (lane & 3);
#pragma unroll
      for (int ni = 0; ni < Cfg::kDimFrags; ++ni) {
        *reinterpret_cast<__half2*>(out + 8 * ni) = normalized(o.pair(0, ni, half * 2), l, inv_l);
      }
      if (p.lse != nullptr && (lane & 3) == 0) {
        const float lse = l == 0.0f ? -INFINITY : __fmul_rn(__fadd_rn(softmax.row_max[half], log2f(l)), kLn2);
        p.lse[static_cast<int64_t>(blk.h) * p.total_q + q_token0 + row] = lse;
      }
    }
  }
};

}  // namespace tilemix::gpu
