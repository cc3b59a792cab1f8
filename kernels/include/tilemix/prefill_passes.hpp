#pragma once
// The passes a routed prefill call (tilemix_prefill) runs, and the scratch they need, decided in
// one place: the launch sequence runs these passes and the device-memory count adds their
// buffers, so the two cannot disagree. Plain C++, built with and without CUDA.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/choices/compute_capability.hpp"
#include "core/choices/prefill.hpp"
#include "core/problem.hpp"

namespace tilemix::gpu {

// True when some word routes a group to INT8. Only then does quantize_once need its passes and
// the q8/k8/scale scratch (tilemix_prefill reads them for INT8 tiles alone); without an INT8
// route a caller skips quantization entirely and may leave those pointers null.
inline bool any_int8_route(const std::vector<uint64_t>& words) {
  return std::any_of(words.begin(), words.end(), [](uint64_t w) { return w != 0; });
}

// What the passes read of a call's routing words.
struct PrefillWords {
  bool any_int8 = false;      // some word routes a group to INT8 (any_int8_route; adaptive: ratio > 0)
  bool built_on_gpu = false;  // layout adaptive: adaptive_words writes them from Q and K at every launch
};

// The passes of one call, in launch order: adaptive_words, smooth_keys, quantize_queries,
// quantize_keys, quantize_values_fp8, then tilemix_prefill with `numerics` on `mainloop`.
struct PrefillPasses {
  bool adaptive_words = false;
  bool smooth_keys = false;          // smooth_k, either mode: Ks, kbar, its block sums and qkbar
  // quantize_once with an INT8 route: Q8, its scales and the Q blocks where the mainloop reads
  // them (warp_specialized codes Q on chip), K8 and its scales on every mainloop.
  bool quantize_queries = false;
  bool quantize_keys = false;
  bool quantize_values_fp8 = false;  // some tile takes FP8 P V: V8 and its scales
  // What tilemix_prefill runs: pv routed without an INT8-routed tile takes FP8 P V nowhere, so it
  // runs as pv fp16 (bit-identical with it), on the mainloop FP8 P V would have taken.
  Numerics numerics;
  PrefillMainloop mainloop = PrefillMainloop::automatic;

  // Whether some pass codes or smooths the operands (every pass but adaptive_words): its time is
  // the bench's quant_ms.
  bool quantizes() const { return smooth_keys || quantize_queries || quantize_keys || quantize_values_fp8; }
  // The K block offsets: the blocks of the K scales, of smooth_keys' sums and of the V codes.
  bool k_block_offsets() const { return quantizes(); }
};

// The passes of a call asking for `numerics` on `mainloop` with routing words `words`, on a GPU
// of compute capability `cc`.
PrefillPasses prefill_passes(const Numerics& numerics, PrefillMainloop mainloop, const PrefillWords& words,
                             ComputeCapability cc = {});

}  // namespace tilemix::gpu
