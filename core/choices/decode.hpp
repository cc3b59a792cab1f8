#pragma once
// The decode kernels' run-time choices and the KV cache a decode call reads, as a config, the apps
// and the dispatcher name them (plain C++: core/decode/decode_case.hpp reads them from configs).
#include "core/enum_names.hpp"

namespace tilemix {

// Which KV cache a decode call reads: INT8 with a scale per 64-token block and KV head, or FP16
// (core/decode/kv_cache.hpp).
enum class CacheKind { int8, fp16 };
inline constexpr EnumName<CacheKind> kCacheKindNames[] = {{CacheKind::int8, "int8"}, {CacheKind::fp16, "fp16"}};
inline const char* to_string(CacheKind k) { return enum_name(kCacheKindNames, k); }

// Which decode mainloop a GPU call runs: mma.sync (every configuration) or wgmma (INT8 cache,
// d = 128, up to 64 query rows per CTA); automatic takes wgmma where it applies and the CTA has
// more than 32 rows (kernels/decode/config.hpp says why).
enum class DecodeMainloop { automatic, mma_sync, wgmma };
inline constexpr EnumName<DecodeMainloop> kDecodeMainloopNames[] = {
    {DecodeMainloop::automatic, "auto"}, {DecodeMainloop::mma_sync, "mma_sync"}, {DecodeMainloop::wgmma, "wgmma"}};
inline const char* to_string(DecodeMainloop m) { return enum_name(kDecodeMainloopNames, m); }

// What the combine of split partial states waits for: the whole decode grid, or each sequence's
// own decode CTAs (automatic: per sequence when there are several sequences and the decode grid
// spans more than one wave).
enum class DecodeCombineWait { automatic, grid, sequence };
inline constexpr EnumName<DecodeCombineWait> kDecodeCombineWaitNames[] = {{DecodeCombineWait::automatic, "auto"},
                                                                          {DecodeCombineWait::grid, "grid"},
                                                                          {DecodeCombineWait::sequence, "sequence"}};
inline const char* to_string(DecodeCombineWait w) { return enum_name(kDecodeCombineWaitNames, w); }

// What the routing words of a decode call hold over the key tiles its sequences have: every tile
// INT8-routed, every tile FP16-routed, or both. The wgmma kernel has an instance per kind: one
// route's tile step alone fits 168 registers without the spill of the instance that holds both
// (decode v28, docs/perf/decode.md). `mixed` is right for any words.
enum class DecodeRoutes { mixed, all_int8, all_fp16 };
inline constexpr EnumName<DecodeRoutes> kDecodeRoutesNames[] = {
    {DecodeRoutes::mixed, "mixed"}, {DecodeRoutes::all_int8, "all_int8"}, {DecodeRoutes::all_fp16, "all_fp16"}};
inline const char* to_string(DecodeRoutes r) { return enum_name(kDecodeRoutesNames, r); }

}  // namespace tilemix
