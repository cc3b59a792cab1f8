#pragma once
// The warp-specialized prefill kernel (sm_90a, prefill v3): one persistent CTA per SM, which
// walks the work tiles its producer takes (tile_scheduler.cuh) in three roles over one shared storage
// (shared_storage_ws.cuh): warpgroup 0 is the producer, whose first thread issues the TMA copies
// (producer_ws.cuh) and, on_the_fly, whose other three warps code K8 (quantizer_ws.cuh);
// warpgroups 1 and 2 are the consumers (consumer_ws.cuh), which code Q8 (tilemix) and store O
// straight from registers.
// launch_prefill_ws for the instance files (instances_ws_*.cu: d = 64 and 128, fp32 and fp16 P V
// accumulation, flash_fp16 and tilemix in both modes, with one score product per step where both
// tiles of every step take one route, two otherwise; instances_ws_fp8pv_*.cu: tilemix with FP8
// P V, fp32 accumulation).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/common/check.cuh"
#include "kernels/common/pipeline.cuh"
#include "kernels/common/tensor_map.hpp"
#include "kernels/prefill/consumer_ws.cuh"
#include "kernels/prefill/epilogue.cuh"
#include "kernels/prefill/kernel_traits_ws.cuh"
#include "kernels/prefill/launch.hpp"
#include "kernels/prefill/producer_ws.cuh"
#include "kernels/prefill/quantizer_ws.cuh"
#include "kernels/prefill/tile_sizes.hpp"

namespace tilemix::gpu {
namespace ws_detail {

template <class Cfg, ScorePaths kPaths, bool kUniformSteps, bool kHalfAccum, PvPaths kPv>
__global__ void __launch_bounds__(Cfg::kCtaThreads, 1) prefill_kernel_ws(const __grid_constant__ KernelParamsWs w) {
  using Kernel = KernelTraitsWs<Cfg, kPaths, kUniformSteps, kHalfAccum, kPv>;
  using Storage = typename Kernel::Storage;
  using Consumer = ConsumerWs<Kernel>;
  extern __shared__ __align__(1024) char smem_raw[];
  char* smem = Storage::align(smem_raw);
  if (threadIdx.x == 0) {
    // `full` counts the producer's one arrive.expect_tx per fill, or for K on_the_fly one commit
    // per quantizer warp (the producer's then completes `loaded`); `empty` the consumers' releases,
    // and for Q on_the_fly the quantizer threads' too (they read the work tile slot).
    const unsigned k_full_arrivals = Kernel::kOnTheFly ? Cfg::kQuantizerWarps : 1;
    const unsigned q_releases = Consumer::kQReleases + (Kernel::kOnTheFly ? 32 * Cfg::kQuantizerWarps : 0);
    Storage::init_barriers(smem, k_full_arrivals, Consumer::kStageReleases, q_releases);
  }
  __syncthreads();
  const int warpgroup = warp_index_uniform() / 4;
  if (warpgroup == 0) {
    warpgroup_release_registers<Cfg::kProducerRegisters>();
    if (threadIdx.x == 0) {
      ProducerWs<Kernel>::run(w, smem);
    } else if constexpr (Kernel::kOnTheFly) {
      if (threadIdx.x >= 32) QuantizerWs<Kernel>::run(w, smem, threadIdx.x - 32);
    }
  } else {
    warpgroup_claim_registers<Cfg::kConsumerRegisters>();
    Consumer::template run<EpilogueDirect<Cfg>>(w, smem, threadIdx.x - 128);
  }
}

inline int sm_count(const std::string& context) {
  int device = 0, sms = 0;
  TILEMIX_CUDA_CHECK(cudaGetDevice(&device), context);
  TILEMIX_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), context);
  return sms;
}

template <int kHeadDim, ScorePaths kPaths, bool kUniformSteps, bool kHalfAccum, PvPaths kPv>
void launch_instance(const KernelParams& params, const PrefillTensors& tensors, const LaunchShape& shape, void* stream,
                     const std::string& context) {
  using Cfg = PrefillConfigWs<kHeadDim>;
  using Storage = typename KernelTraitsWs<Cfg, kPaths, kUniformSteps, kHalfAccum, kPv>::Storage;
  constexpr int D = Cfg::kHeadDim;
  KernelParamsWs w{};
  w.p = params;
  w.q = make_head_tensor_map(params.q, 2, tensors.total_q, params.hq, D, params.q_row_bytes, Cfg::kBlockM, 64, context);
  w.k = make_head_tensor_map(params.k, 2, tensors.total_k, params.hk, D, params.kv_row_bytes, Cfg::kRouteTileN, 64, context);
  w.v = make_head_tensor_map(params.v, 2, tensors.total_k, params.hk, D, params.kv_row_bytes, Cfg::kRouteTileN, 64, context);
  // quantize_once without an INT8 tile may run without K8 (the producer copies it only for
  // INT8-routed tiles); Q8 is coded on chip.
  if (kPaths == ScorePaths::routed_quantize_once && params.k8 != nullptr) {
    w.k8 = make_head_tensor_map(params.k8, 1, tensors.total_k, params.hk, D, params.k8_row_bytes, Cfg::kRouteTileN, D,
                                context);
  }
  if constexpr (kPv != PvPaths::fp16) w.v8 = make_value_codes_tensor_map(params.v8, params.v8_columns, params.hk, D, context);
  w.tiles = PersistentTiles{static_cast<int>(shape.query_tiles), shape.heads, shape.batch, params.work_tile_counters};

  constexpr int kSmemBytes = Storage::kAllocBytes;
  const auto kernel = prefill_kernel_ws<Cfg, kPaths, kUniformSteps, kHalfAccum, kPv>;
  TILEMIX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes), context);
  const int64_t tiles = shape.query_tiles * shape.heads * shape.batch;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(tiles, sm_count(context))));
  kernel<<<grid, Cfg::kCtaThreads, kSmemBytes, static_cast<cudaStream_t>(stream)>>>(w);
  cuda_check(cudaGetLastError(), "launch of prefill_kernel_ws (warp-specialized mainloop)",
             context + " grid=" + std::to_string(grid.x) + " tiles=" + std::to_string(tiles) +
                 " smem=" + std::to_string(kSmemBytes));
}

}  // namespace ws_detail

template <int kHeadDim, ScorePaths kPaths, bool kHalfAccum, PvPaths kPv>
void launch_prefill_ws(const KernelParams& params, const PrefillTensors& tensors, const LaunchShape& shape,
                       bool uniform_steps, void* stream, const std::string& context) {
  if constexpr (kPaths == ScorePaths::fp16) {
    ws_detail::launch_instance<kHeadDim, kPaths, true, kHalfAccum, kPv>(params, tensors, shape, stream, context);
  } else if (uniform_steps) {
    ws_detail::launch_instance<kHeadDim, kPaths, true, kHalfAccum, kPv>(params, tensors, shape, stream, context);
  } else {
    ws_detail::launch_instance<kHeadDim, kPaths, false, kHalfAccum, kPv>(params, tensors, shape, stream, context);
  }
}

}  // namespace tilemix::gpu
