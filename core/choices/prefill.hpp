#pragma once
// The prefill kernels' run-time choice of mainloop, as configs, apps and the dispatcher name it
// (plain C++: core/config reads it from configs).
#include "core/enum_names.hpp"

namespace tilemix {

// Which mainloop a prefill call runs: wgmma (prefill v2, d = 128 with fp32 accumulation: two CTAs
// of two warpgroups per SM, cp.async; at d = 64 or with fp16 accumulation it runs the mma.sync
// kernel), warp_specialized (prefill v3, every d, accumulation and mode: a persistent CTA per
// SM, a TMA producer warpgroup and two consumer warpgroups, 128-key steps), both sm_90a alone, or
// mma_sync (the mma.sync kernel at every d and accumulation: the one that runs from sm_80).
// automatic takes the faster of them for the call and the GPU, as measured (gpu::tilemix_mainloop
// and gpu::flash_mainloop in kernels/include/tilemix/attention.hpp).
enum class PrefillMainloop { automatic, wgmma, warp_specialized, mma_sync };
inline constexpr EnumName<PrefillMainloop> kPrefillMainloopNames[] = {
    {PrefillMainloop::automatic, "auto"},
    {PrefillMainloop::wgmma, "wgmma"},
    {PrefillMainloop::warp_specialized, "warp_specialized"},
    {PrefillMainloop::mma_sync, "mma_sync"}};
inline const char* to_string(PrefillMainloop m) { return enum_name(kPrefillMainloopNames, m); }

// What a mainloop's numerics add to Numerics, for the emulator of its calls (EmulatorOptions):
// key tiles per online-softmax step, and whether the score scale is folded into the exponent
// (p = exp2(fma(raw, scale, -m)) instead of exp2(round(raw * scale) - m)).
struct PrefillEmulation {
  int softmax_tiles = 1;
  bool fused_score_scale = false;
};

}  // namespace tilemix
