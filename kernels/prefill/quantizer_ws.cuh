#pragma once
// on_the_fly on the warp-specialized prefill kernel: the producer warpgroup's quantizer warps
// (warps 1-3) code Q8 and each INT8-routed half's K8 from the FP16 Q and K that TMA brought into
// shared memory, off the consumers' path, with the blocks and rounding of quantize_qk (absmax over
// the block's rows in the sequence, int8_block_scale, Int8Encoder), so that both modes give
// identical codes and scales.
#include <cstdint>

#include "kernels/common/pipeline.cuh"
#include "kernels/common/tile_routes.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/prefill/kernel_traits_ws.cuh"
#include "kernels/quant/int8_codes.cuh"

namespace tilemix::gpu {

// Codes of `src` [kRows x kDim FP16: kDim / 64 channel blocks `src_block_bytes` apart, each of
// 128-byte rows in the 128-byte swizzle] into `dst` [kRows x kDim INT8, int8_rows_offset]; returns
// the scale. Rows from `valid` on belong to no token of the block (another sequence's, or past
// the tensor): they do not enter the absmax, and their codes are never read as real tokens'. The
// kThreads threads (`tid` 0 .. kThreads - 1, whole warps) meet at named barrier `barrier_id`;
// `scratch` holds one float per warp. The codes are fenced for wgmma's reads before the return.
template <int kRows, int kDim, int kThreads>
__device__ __forceinline__ float quantize_resident_rows(const char* src, int src_block_bytes, char* dst, int valid,
                                                        int tid, float* scratch, unsigned barrier_id) {
  constexpr int kChunksPerRow = kDim / 8;  // 16-byte FP16 chunks: 8 channels, 8 codes each
  constexpr int kChunks = kRows * kChunksPerRow;
  const auto source = [&](int i) {
    const int row = i / kChunksPerRow, chunk = i % kChunksPerRow;
    return *reinterpret_cast<const uint4*>(src + (chunk / 8) * src_block_bytes + sw128_offset(row, (chunk % 8) * 16));
  };
  float m = 0.0f;
#pragma unroll 1
  for (int i = tid; i < valid * kChunksPerRow; i += kThreads) m = absmax8(source(i), m);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if ((tid & 31) == 0) scratch[tid >> 5] = m;
  named_barrier_sync(barrier_id, kThreads);
  float absmax = scratch[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) absmax = fmaxf(absmax, scratch[w]);
  const float scale = int8_block_scale(absmax);

  const Int8Encoder encoder(scale);
#pragma unroll 1
  for (int i = tid; i < kChunks; i += kThreads) {
    const int row = i / kChunksPerRow, chunk = i % kChunksPerRow;
    *reinterpret_cast<uint2*>(dst + int8_rows_offset<kDim>(row, chunk * 8)) = encoder.encode8(source(i));
  }
  fence_proxy_async_shared();
  named_barrier_sync(barrier_id, kThreads);  // scratch is free again, and every warp's codes are written
  return scale;
}

// The quantizer warps (`qtid` 0 .. kThreads - 1): for every work tile of the CTA, in the
// producer's order, Q8 and Q's scale once Q landed (when some key tile is INT8), then per step
// each INT8-routed half's K8 and K scale once the K stage landed; every quantizer warp then
// commits (an arrive on `full`), which hands the codes and scales to the consumers.
template <class Kernel>
struct QuantizerWs {
  static_assert(Kernel::kOnTheFly, "quantize_once copies its codes");
  using Cfg = typename Kernel::Cfg;
  using Storage = typename Kernel::Storage;
  static constexpr int D = Kernel::D;
  static constexpr int kHalfN = Kernel::kHalfN;
  static constexpr int kThreads = 32 * Cfg::kQuantizerWarps;
  static constexpr unsigned kBarrier = static_cast<unsigned>(NamedBarrierWs::quantizers);

  __device__ __forceinline__ static void run(const KernelParamsWs& w, char* smem, int qtid) {
    const KernelParams& p = w.p;
    const int lane = qtid & 31;
    float* scratch = Storage::scratch(smem);
    auto q_ring = Storage::q_pipeline(smem);
    auto k_ring = Storage::k_pipeline(smem);
    for (const int64_t t : w.tiles.of_this_cta()) {
      BlockInfo blk;
      TileRouting routing;
      if (!w.tiles.template work_tile<Cfg::kBlockM, Cfg::kRouteTileN, true>(p, t, blk, routing)) continue;
      q_ring.wait_landed();
      if (routing.any_int8) {
        const float scale = quantize_resident_rows<Cfg::kBlockM, D, kThreads>(
            smem + Storage::kQ, Storage::kQBlockBytes, smem + Storage::kQ8, blk.rows, qtid, scratch, kBarrier);
        if (qtid == 0) *Storage::q_scale(smem) = scale;
      }
      q_ring.commit_by_warp(lane);
      q_ring.advance();
      TileRoutes routes(routing.word, routing.group, 0);
      for (int n = 0; n < Kernel::steps(blk); ++n) {
        StepRoutes step;
        step.template next<true>(routes, blk, n);
        k_ring.wait_landed();
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (!step.int8[h]) continue;
          const int key0 = (2 * n + h) * kHalfN;  // the half's first key in the sequence
          const float scale = quantize_resident_rows<kHalfN, D, kThreads>(
              smem + Storage::k(k_ring.stage()) + h * Storage::kHalfBytes, Storage::kBlockBytes,
              smem + Storage::k8(k_ring.stage()) + h * Storage::kK8HalfOffset, min(kHalfN, blk.lk - key0), qtid,
              scratch, kBarrier);
          if (qtid == 0) *Storage::k_scale(smem, k_ring.stage(), h) = scale;
        }
        k_ring.commit_by_warp(lane);
        k_ring.advance();
      }
    }
  }
};

}  // namespace tilemix::gpu
