#pragma once
// Named compile-time configurations of the split-K decode kernel (plain C++: the dispatcher
// reads them too). Every size carries the reason it was chosen; docs/perf/decode.md has the numbers.
//
// The MMAs run "transposed": keys (and for P V, channels) are the 16 rows of an m16n8 MMA and the
// query rows of the CTA (query heads x new tokens) are its 8 columns. Decode has few query rows
// (4 for GQA 4 and one new token), so padding them to 8 instead of 16 halves the MMAs, and the
// K and V fragments, which are what streams, come straight from shared memory as A operands.
#include "core/choices/compute_capability.hpp"
#include "core/choices/decode.hpp"
#include "core/quant.hpp"

namespace tilemix::gpu {

// Keys per tile = BLKK: an INT8 key tile is one scale block (one K and one V scale per tile).
inline constexpr int kDecodeBlockN = 64;
static_assert(kDecodeBlockN == kBlockK, "a decode key tile is one cache scale block");

// Query rows of one decode CTA at most: query heads x new tokens of one KV head; more heads are
// split into head chunks of this many rows (the largest row configuration below).
inline constexpr int kDecodeMaxRows = 128;

// The split combine's per-sequence counts (kernels/decode/combine.cu) lie 128 bytes apart: every
// combine warp of a sequence polls its count, and counts that shared a line would put all of that
// polling on one L2 slice, beside the decode kernel's last tiles (decode v13, docs/perf/decode.md).
inline constexpr int kDecodeArrivalStride = 32;  // 4-byte counts

// The wgmma kernel: one warpgroup, the CTA's rows padded to the 64 rows of a wgmma tile, d = 128.
// Two stages (a tile's successor is issued under its P V, so one or two 16 KB tiles are in flight
// while one is computed) and the FP16 K written over its own stage keep shared memory at 72 KB, so
// three CTAs (12 warps) share a multiprocessor: the kernel is bound by the latency of its per-tile
// chain (conversion, MMA, softmax), which more warps hide. Three or four stages with two CTAs per
// SM (88 or 104 KB) measured 3-10% slower at 16k x 8 (docs/perf/decode.md, decode v9).
inline constexpr int kDecodeWgmmaRows = 64;
inline constexpr int kDecodeWgmmaDim = 128;
inline constexpr int kDecodeWgmmaStages = 2;
inline constexpr int kDecodeWgmmaCtasPerSm = 3;

inline bool decode_wgmma_applies(CacheKind cache, int d, int rows) {
  return cache == CacheKind::int8 && d == kDecodeWgmmaDim && rows <= kDecodeWgmmaRows;
}
// The mainloop `requested` resolves to. Automatic takes wgmma for 33 to 64 rows only: measured
// on an H200 (7bdcd79:results/h200/decode-mainloop-v1.json) the wgmma kernel wins at 64 rows (16 new
// tokens x GQA 4: 1.23-1.28x) and loses at 16 and 32 rows (0.6-0.9x), where the mma.sync
// kernel's 8-column tiles waste little and its four key warps hide more latency. The wgmma kernel
// is built for sm_90a: on other GPUs automatic takes mma_sync.
inline constexpr int kDecodeWgmmaMinRows = 33;
inline DecodeMainloop decode_mainloop(DecodeMainloop requested, CacheKind cache, int d, int rows,
                                      ComputeCapability cc = {}) {
  if (requested == DecodeMainloop::automatic) {
    return cc.runs_sm90a() && decode_wgmma_applies(cache, d, rows) && rows >= kDecodeWgmmaMinRows
               ? DecodeMainloop::wgmma
               : DecodeMainloop::mma_sync;
  }
  return requested;
}

// Row configurations: the CTA's query rows rounded up to one of these.
inline int decode_row_config(int rows) {
  for (int r : {8, 16, 32, 64}) {
    if (rows <= r) return r;
  }
  return kDecodeMaxRows;
}

template <int kHeadDim_, int kRows_, CacheKind kCache_>
struct DecodeConfig {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kRows = kRows_;
  static constexpr CacheKind kCache = kCache_;
  static constexpr bool kInt8 = kCache == CacheKind::int8;
  static constexpr int kBlockN = kDecodeBlockN;

  // A warp owns 8 or 16 query rows (one or two n8 fragments) and a slice of the keys of each
  // tile. Few rows: the four warps split the keys (each K/V byte is read from shared memory by
  // one warp) and meet once per tile to agree on the row maxima. Many rows: warps split the rows
  // and each reads the whole tile (64 rows x 128 channels of O per warp would not fit registers).
  static constexpr int kQueryFrags = kRows <= 8 ? 1 : 2;
  static constexpr int kQueryWarps = kRows / (8 * kQueryFrags);
  static constexpr int kKeyWarps = kQueryWarps >= 4 ? 1 : 4 / kQueryWarps;
  static constexpr int kWarps = kQueryWarps * kKeyWarps;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpRows = 8 * kQueryFrags;
  static constexpr int kWarpKeys = kBlockN / kKeyWarps;
  static constexpr int kKeySlices = kWarpKeys / 16;  // m16 key slices of a warp per tile
  static constexpr int kDimSlices = kHeadDim / 16;   // m16 channel slices of O^T

  // Stage = K and V of one tile (INT8: 16 KB at d = 128, FP16: 32 KB). Stages are sized so that
  // a CTA keeps 48 KB (INT8) or 64 KB (FP16) of cache loads in flight while it computes one tile:
  // with two CTAs per SM that is 96-128 KB per SM, against about 36 KB that 4.8 TB/s over 132
  // SMs needs at a microsecond of latency.
  static constexpr int kElemBytes = kInt8 ? 1 : 2;
  static constexpr int kTileRowBytes = kHeadDim * kElemBytes;
  static constexpr int kTileBytes = kBlockN * kTileRowBytes;
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kStages = (kInt8 ? 64 * 1024 : 96 * 1024) / kStageBytes;

  // CTAs per SM the launch bounds ask for. Shared memory fits three INT8 CTAs (66 KB each) or
  // two FP16 ones (99 KB). Registers: O^T is kDimSlices * kQueryFrags * 4 floats (64 at d = 128
  // with 16 rows per warp), Q d / 8 words per query fragment (and d / 16 of codes for INT8), S
  // kKeySlices * kQueryFrags * 4. Up to 16 rows, three INT8 CTAs fit their registers (168 per
  // thread) without spills; with 32 or 64 rows per CTA (64 keys per warp) they would spill, so
  // two. docs/perf/decode.md lists registers and shared memory per instance.
  static constexpr int kMinBlocksPerSm = kWarps == 8 ? 1 : (kInt8 && kRows <= 16 ? 3 : 2);

  static_assert(kHeadDim == 64 || kHeadDim == 128, "unsupported head dimension");
  static_assert(kRows == kQueryWarps * kWarpRows && kWarps <= 8, "rows split into whole warps");
  static_assert(kWarpKeys % 16 == 0, "a warp owns whole m16 key slices");
  static_assert(kStages >= 3, "at least two tiles in flight");
};

// What an FP16-routed key tile costs against an INT8-routed one, by which the split plan moves its
// cuts (balance_decode_splits) so that a sequence's splits end together. The wgmma kernel (16 new
// tokens): per 16k cache tokens at batch 8, `zero` 92.4 us against `one` 72.2 (the line fits of
// 7bdcd79:results/h200/decode-v22.json), 1.28. The mma.sync kernel's routes cost within 2% of each other
// (4 new tokens at 16k x 8: `zero` 76.5-77.3 us, `one` 75.2-75.9), so its splits stay uniform.
inline constexpr double kDecodeWgmmaFp16TileCost = 1.28;
inline double decode_fp16_tile_cost(CacheKind cache, DecodeMainloop mainloop) {
  return cache == CacheKind::int8 && mainloop == DecodeMainloop::wgmma ? kDecodeWgmmaFp16TileCost : 1.0;
}

// CTAs per multiprocessor that the instance for `rows` query rows (and the resolved mainloop) is
// built to keep resident (its launch bounds; shared memory is sized to match): the split plan
// counts waves with it.
inline int decode_resident_ctas(CacheKind cache, int rows, DecodeMainloop mainloop) {
  if (mainloop == DecodeMainloop::wgmma) return kDecodeWgmmaCtasPerSm;
  const bool int8 = cache == CacheKind::int8;
  switch (decode_row_config(rows)) {
    case 8: return int8 ? DecodeConfig<128, 8, CacheKind::int8>::kMinBlocksPerSm
                        : DecodeConfig<128, 8, CacheKind::fp16>::kMinBlocksPerSm;
    case 16: return int8 ? DecodeConfig<128, 16, CacheKind::int8>::kMinBlocksPerSm
                         : DecodeConfig<128, 16, CacheKind::fp16>::kMinBlocksPerSm;
    case 32: return int8 ? DecodeConfig<128, 32, CacheKind::int8>::kMinBlocksPerSm
                         : DecodeConfig<128, 32, CacheKind::fp16>::kMinBlocksPerSm;
    case 64: return int8 ? DecodeConfig<128, 64, CacheKind::int8>::kMinBlocksPerSm
                         : DecodeConfig<128, 64, CacheKind::fp16>::kMinBlocksPerSm;
    default: return int8 ? DecodeConfig<128, kDecodeMaxRows, CacheKind::int8>::kMinBlocksPerSm
                         : DecodeConfig<128, kDecodeMaxRows, CacheKind::fp16>::kMinBlocksPerSm;
  }
}

}  // namespace tilemix::gpu
