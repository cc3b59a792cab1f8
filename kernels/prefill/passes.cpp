#include "tilemix/prefill_passes.hpp"

#include "tilemix/attention.hpp"

namespace tilemix::gpu {

PrefillPasses prefill_passes(const Numerics& numerics, PrefillMainloop mainloop, const PrefillWords& words,
                             ComputeCapability cc) {
  PrefillPasses passes;
  passes.adaptive_words = words.built_on_gpu;
  passes.smooth_keys = numerics.smooth_k;
  // The mainloop of the numerics asked for, so that pv routed runs where its FP8 kernel would.
  passes.mainloop = tilemix_mainloop(mainloop, numerics, cc);
  // quantize_once's kernel reads the codes for INT8 tiles alone, and the warp-specialized one codes
  // Q on chip from the tile it loads anyway; on_the_fly codes its tiles itself.
  passes.quantize_keys = numerics.mode == QuantMode::quantize_once && words.any_int8;
  passes.quantize_queries = passes.quantize_keys && passes.mainloop != PrefillMainloop::warp_specialized;
  // Some tile takes FP8 P V: every tile with pv fp8, the INT8-routed ones with pv routed.
  passes.quantize_values_fp8 = numerics.fp8_pv(words.any_int8);
  passes.numerics = numerics;
  if (!passes.quantize_values_fp8) passes.numerics.pv = PvPrecision::fp16;
  return passes;
}

}  // namespace tilemix::gpu
