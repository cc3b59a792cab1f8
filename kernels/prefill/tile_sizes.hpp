#pragma once
// Named compile-time configurations of the prefill kernels (plain C++: host code reads the
// geometry from here too). Every size carries the reason it was chosen.
#include <stdexcept>
#include <string>

#include "core/quant.hpp"
#include "core/tiling.hpp"
#include "core/choices/prefill.hpp"

namespace tilemix::gpu {

// Query rows per CTA. Equal to BLKQ, so a CTA's INT8 Q operand is exactly one scale block: one
// Q scale per CTA, and on-the-fly quantization of Q needs no data from other CTAs.
inline constexpr int kPrefillBlockM = 128;
// Keys per K/V tile. Equal to BLKK, so an INT8 key tile is exactly one K scale block (one scale
// per tile) and a routing group is a whole number of tiles.
inline constexpr int kPrefillBlockN = 64;
static_assert(kPrefillBlockM == kBlockQ && kPrefillBlockN == kBlockK, "tiles must match the scale blocks");

inline bool prefill_supports_head_dim(int d) { return d == 64 || d == 128; }

// Both kernels use one geometry, so a `zero` plan of tilemix and flash_fp16 walk identical tiles.
inline TileGeometry prefill_geometry(int d, const char* kernel) {
  if (!prefill_supports_head_dim(d)) {
    throw std::invalid_argument(std::string(kernel) + ": unsupported head dimension d=" + std::to_string(d) +
                                " (supported: 64, 128)");
  }
  return TileGeometry{kPrefillBlockM, kPrefillBlockN};
}

// Per head dimension: warps, rows per warp and the occupancy target.
template <int kHeadDim_>
struct PrefillConfig {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kPrefillBlockM;
  static constexpr int kBlockN = kPrefillBlockN;
  // 4 warps x 32 rows: each K/V fragment read from shared memory by ldmatrix feeds two m16 MMAs
  // (one per 16-row slice), which halves shared-memory traffic per MMA compared with 8 warps x 16
  // rows. With 16-row warps the K and V fragments alone ask as many bytes per cycle as shared
  // memory delivers while mma.sync runs at its peak on sm_80/sm_90.
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpRows = kBlockM / kWarps;
  static constexpr int kRowSlices = kWarpRows / 16;    // m16 MMA tiles per warp
  static constexpr int kKeyFrags = kBlockN / 8;        // n8 tiles of a score row slice
  static constexpr int kDimFrags = kHeadDim / 8;       // n8 tiles of an output row slice
  // Two CTAs per SM: 8 warps per SM hide MMA and ldmatrix latency, and the registers (O: 4*d/8
  // floats, S: 64 floats per thread) fit 255 per thread at d = 128. At d = 64 half the O
  // registers go, so three CTAs fit.
  static constexpr int kMinBlocksPerSm = kHeadDim == 64 ? 3 : 2;
  static_assert(kHeadDim == 64 || kHeadDim == 128, "unsupported head dimension");
  static_assert(kWarpRows % 16 == 0, "a warp owns whole m16 slices");
};

// The wgmma mainloop (sm_90a, d = 128): two warpgroups of 64 query rows (wgmma's M) make the same
// 128-row query tile, so plans, routing words and the emulator's tile walk are unchanged. Each
// warpgroup multiplies its rows straight from shared memory (Q, K, V in the 128-byte swizzle),
// so no fragment is loaded twice and a warp owns 16 rows. Two CTAs per SM: 128 registers per
// thread (O 64 + S 32 floats) fit without spills, and 2 x (112 KB + 1 KB alignment slack + 1 KB
// reserved) is exactly the SM's 228 KB for tilemix; 16 warps instead of 8 were 17-28% faster on
// an H200 (results/h200/experiments/prefill-v2-two-ctas-ab.json).
template <int kHeadDim_>
struct PrefillConfigSm90 {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kPrefillBlockM;
  static constexpr int kBlockN = kPrefillBlockN;
  static constexpr int kWarpgroups = 2;
  static constexpr int kWarps = 4 * kWarpgroups;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpRows = kBlockM / kWarps;  // 16: the warp's slice of a wgmma tile
  static constexpr int kRowSlices = 1;
  static constexpr int kKeyFrags = kBlockN / 8;
  static constexpr int kDimFrags = kHeadDim / 8;
  static constexpr int kMinBlocksPerSm = 2;
  static_assert(kHeadDim == 128, "the wgmma mainloop is built for d = 128");
  static_assert(kBlockM == 64 * kWarpgroups, "a warpgroup owns 64 rows");
};

// The warp-specialized mainloop (sm_90a, d = 64 and 128, prefill v3): one producer warpgroup issues TMA
// copies, two consumer warpgroups of 64 query rows each compute the same 128-row query tile as
// PrefillConfigSm90. A consumer step covers two routing tiles, 128 keys: each 64-key half keeps
// its own route, K scale and copy (K8 or K), so plans and words are unchanged, while the online
// softmax, the mask and P V run once per 128 keys. Per key that halves the row reductions, the
// O rescale, the barrier waits and the loop overhead of 64-key steps, and where a step cannot mix
// paths its score product is one m64n128 wgmma, which reads each Q fragment once for 128 keys.
// One persistent CTA per SM: the registers setmaxnreg gives a consumer thread hold the scores of
// a step in flight (64), O (d / 2 floats, d / 4 with fp16 accumulation) and the previous step's P
// (32). Shared memory at d = 128: Q 32 KB, Q8 16 KB, 2 K stages and 2 V stages of 32 KB = 176 KB
// (half of each at d = 64); K and V have their own full/empty barriers, so a K stage returns to
// the producer once its scores landed, a step before its V does.
template <int kHeadDim_>
struct PrefillConfigWs {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kPrefillBlockM;
  static constexpr int kRouteTileN = kPrefillBlockN;  // keys per routing tile (plans, words, K scales)
  static constexpr int kBlockN = 2 * kRouteTileN;     // keys per consumer step (mask, softmax, P V)
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kCtaThreads = 128 * (1 + kConsumerWarpgroups);
  // What the shared pieces (mask, softmax, accumulator, epilogue) see: the consumer warps.
  static constexpr int kWarps = 4 * kConsumerWarpgroups;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpRows = kBlockM / kWarps;  // 16: the warp's slice of a wgmma tile
  static constexpr int kRowSlices = 1;
  static constexpr int kKeyFrags = kBlockN / 8;
  static constexpr int kDimFrags = kHeadDim / 8;
  static constexpr int kKStages = 2;
  static constexpr int kVStages = 2;
  // setmaxnreg moves registers within the CTA's allocation (384 threads x 168 = 64,512): 128 x 24 +
  // 256 x 240 fills it. With 232 per consumer thread ptxas spilled 48-84 bytes of the two-product
  // instance, and at 216 it serialized its wgmmas (C7512). on_the_fly's quantizer warps spill about
  // 300 bytes at 24; 56 (with 216 for the consumers) took 11% off a one-layout call
  // (docs/perf/prefill.md) but serializes the two-product instance, so every path keeps 24 / 240.
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = 240;
  // on_the_fly: the producer warpgroup's warps 1-3 code Q8 and K8 (warp 0 issues the copies).
  static constexpr int kQuantizerWarps = 3;
  static_assert(kHeadDim == 64 || kHeadDim == 128, "the warp-specialized mainloop is built for d = 64 and 128");
  static_assert(kBlockM == 64 * kConsumerWarpgroups, "a consumer warpgroup owns 64 rows");
};

// The emulation of a call on a resolved `mainloop` (tilemix_mainloop, flash_mainloop): prefill v3
// updates the softmax once per step of two routing tiles and folds the scale into the exponent
// (OnlineSoftmax::update_fused), at every head dimension and accumulation it serves.
inline PrefillEmulation emulation_of(PrefillMainloop mainloop) {
  if (mainloop != PrefillMainloop::warp_specialized) return {};
  return {PrefillConfigWs<128>::kBlockN / PrefillConfigWs<128>::kRouteTileN, true};
}

}  // namespace tilemix::gpu
