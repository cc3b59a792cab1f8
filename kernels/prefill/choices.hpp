#pragma once
// The prefill kernels' run-time choice of mainloop, as configs, apps and the dispatcher name it
// (plain C++, no dependencies: core/config reads it from configs).
namespace tilemix {

// Which mainloop a d = 128, fp32-accumulation prefill call runs: wgmma (prefill v2: two CTAs of
// two warpgroups per SM, cp.async) or warp_specialized (prefill v3: a persistent CTA per SM, a TMA
// producer warpgroup and two consumer warpgroups, 128-key steps; flash_fp16 and quantize_once
// only). automatic takes wgmma: v3 does not serve on_the_fly, which must stay bit-identical to
// quantize_once on one kernel, and is slower at 2k causal (docs/perf/prefill.md). d = 64 and fp16
// accumulation run on the mma.sync kernel whatever is asked.
enum class PrefillMainloop { automatic, wgmma, warp_specialized };

// What a mainloop's numerics add to Numerics, for the emulator of its calls (EmulatorOptions):
// key tiles per online-softmax step, and whether the score scale is folded into the exponent
// (p = exp2(fma(raw, scale, -m)) instead of exp2(round(raw * scale) - m)).
struct PrefillEmulation {
  int softmax_tiles = 1;
  bool fused_score_scale = false;
};

inline const char* to_string(PrefillMainloop m) {
  switch (m) {
    case PrefillMainloop::automatic: return "auto";
    case PrefillMainloop::wgmma: return "wgmma";
    case PrefillMainloop::warp_specialized: return "warp_specialized";
  }
  return "?";
}

}  // namespace tilemix
