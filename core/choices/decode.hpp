#pragma once
// The decode kernels' run-time choices, as a config, the apps and the dispatcher name them (plain
// C++, no dependencies: core/decode/decode_case.hpp reads them from configs).
namespace tilemix {

// Which decode mainloop a GPU call runs: mma.sync (every configuration) or wgmma (INT8 cache,
// d = 128, up to 64 query rows per CTA); automatic takes wgmma where it applies and the CTA has
// more than 32 rows (kernels/decode/config.hpp says why).
enum class DecodeMainloop { automatic, mma_sync, wgmma };

// What the combine of split partial states waits for: the whole decode grid, or each sequence's
// own decode CTAs (automatic: per sequence when there are several sequences and the decode grid
// spans more than one wave).
enum class DecodeCombineWait { automatic, grid, sequence };

// What the routing words of a decode call hold over the key tiles its sequences have: every tile
// INT8-routed, every tile FP16-routed, or both. The wgmma kernel has an instance per kind: one
// route's tile step alone fits 168 registers without the spill of the instance that holds both
// (decode v28, docs/perf/decode.md). `mixed` is right for any words.
enum class DecodeRoutes { mixed, all_int8, all_fp16 };

inline const char* to_string(DecodeMainloop m) {
  switch (m) {
    case DecodeMainloop::automatic: return "auto";
    case DecodeMainloop::mma_sync: return "mma_sync";
    case DecodeMainloop::wgmma: return "wgmma";
  }
  return "?";
}

inline const char* to_string(DecodeCombineWait w) {
  switch (w) {
    case DecodeCombineWait::automatic: return "auto";
    case DecodeCombineWait::grid: return "grid";
    case DecodeCombineWait::sequence: return "sequence";
  }
  return "?";
}

inline const char* to_string(DecodeRoutes r) {
  switch (r) {
    case DecodeRoutes::mixed: return "mixed";
    case DecodeRoutes::all_int8: return "all_int8";
    case DecodeRoutes::all_fp16: return "all_fp16";
  }
  return "?";
}

}  // namespace tilemix
