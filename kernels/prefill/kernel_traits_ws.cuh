#pragma once
// What the roles of the warp-specialized prefill kernel share (sm_90a, d = 64 and 128, prefill
// v3): the launch parameters, the instance's compile-time choices and its shared storage, the
// named barriers, and the walk of a work tile in steps of two routing tiles. The roles:
// producer_ws.cuh (TMA copies), quantizer_ws.cuh (on_the_fly's K8), consumer_ws.cuh (Q8, scores,
// softmax, P V, epilogue); prefill_kernel_ws.cuh composes them.
#include <cuda.h>

#include "kernels/common/tile_routes.cuh"
#include "kernels/prefill/launch.hpp"
#include "kernels/prefill/params.cuh"
#include "kernels/prefill/shared_storage_ws.cuh"
#include "kernels/prefill/tile_scheduler.cuh"

namespace tilemix::gpu {

// Parameters of the warp-specialized kernel: the common ones and the tensor maps of the TMA copies
// (Q, K, V as 64-channel boxes of 128 bytes; K8 as boxes of all d channels, 64 or 128 bytes; K, K8
// and V boxes of one routing tile of keys), built on the host.
struct KernelParamsWs {
  KernelParams p;
  CUtensorMap q, k, v, k8;
  PersistentTiles tiles;
  CUtensorMap v8;  // pv fp8 / routed: boxes of 64 keys x d channels (last: the others keep their offsets)
};

// The named barriers of the kernel (0 is __syncthreads) and what each orders.
enum class NamedBarrierWs : unsigned {
  zeroed_v_rows = 1,   // the consumers' zeros in a partial last step's V rows, before either's P V
  quantizers = 2,      // the quantizer warps' partial maxima before the scale, their codes before `full`
  consumer_turns = 3,  // and 4: consumer warpgroup w's turn at the tensor cores is consumer_turns + w
  query_codes = 5,     // and 6: consumer warpgroup w's partial maxima of Q before its scale, its Q8 codes
                       // before its wgmma, at query_codes + w
};

// The routes of a step's two halves (a half past the work tile's last key tile takes none).
struct StepRoutes {
  bool halves2 = false;  // the step's second routing tile exists
  bool int8[2] = {false, false};

  template <bool kRouted>
  __device__ __forceinline__ void next(TileRoutes& routes, const BlockInfo& blk, int step) {
    halves2 = 2 * step + 1 < blk.key_tiles;
    int8[0] = kRouted && routes.next();
    int8[1] = kRouted && halves2 && routes.next();
  }
  // Whether half h takes FP8 P V under kPv (pv fp8: every existing half; pv routed: the
  // INT8-routed ones).
  template <PvPaths kPv>
  __device__ __forceinline__ bool fp8(int h) const {
    if constexpr (kPv == PvPaths::fp16) {
      return false;
    } else {
      return (h == 0 || halves2) && (kPv == PvPaths::fp8 || int8[h]);
    }
  }
  // The step's FP8 group: bit h for half h.
  template <PvPaths kPv>
  __device__ __forceinline__ unsigned fp8_halves() const {
    return (fp8<kPv>(0) ? 1u : 0u) | (fp8<kPv>(1) ? 2u : 0u);
  }
};

// One instance of the kernel. kUniformSteps: the two halves of every step take one path
// (flash_fp16, or a plan whose steps never mix routes: PrefillParams::uniform_steps), so a step's
// scores are one m64n128 product; otherwise one m64n64 product per half. kHalfAccum: P V
// accumulates in fp16 (accum fp16). kPv: P V per half, FP8 (fp8_pv.cuh) for the halves
// StepRoutes::fp8 names, FP16 for the others (pv fp8 / routed; fp32 accumulation).
template <class Cfg_, ScorePaths kPaths_, bool kUniformSteps_, bool kHalfAccum_, PvPaths kPv_>
struct KernelTraitsWs {
  using Cfg = Cfg_;
  static constexpr ScorePaths kPaths = kPaths_;
  static constexpr bool kUniformSteps = kUniformSteps_;
  static constexpr bool kHalfAccum = kHalfAccum_;
  static constexpr PvPaths kPv = kPv_;
  static constexpr bool kFp8Pv = kPv != PvPaths::fp16;
  static_assert(!(kFp8Pv && kHalfAccum), "FP8 P V accumulates in fp32");
  static_assert(kPv != PvPaths::routed || kPaths != ScorePaths::fp16, "routed P V follows the score routes");
  static constexpr bool kRouted = kPaths != ScorePaths::fp16;
  static constexpr bool kOnceCopies = kPaths == ScorePaths::routed_quantize_once;  // TMA brings K8
  static constexpr bool kOnTheFly = kPaths == ScorePaths::routed_on_the_fly;
  using Storage = SharedStorageWs<Cfg, kPaths, kUniformSteps, kFp8Pv>;
  static constexpr int D = Cfg::kHeadDim;
  static constexpr int kHalfN = Cfg::kRouteTileN;

  // Steps of a work tile: its key tiles two at a time.
  __device__ __forceinline__ static int steps(const BlockInfo& blk) { return (blk.key_tiles + 1) / 2; }
};

}  // namespace tilemix::gpu
