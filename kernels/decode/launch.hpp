#pragma once
// The compiled instances of the decode kernels and their launchers. Plain C++ apart from the
// stream handle; dispatch.cu maps run-time values onto these instances.
#include <string>

#include "kernels/decode/config.hpp"

namespace tilemix::gpu {

struct DecodeKernelParams;

// One split-K decode launch: a 1-D grid of total splits x hk x head chunks CTAs, the KV heads
// and head chunks of one split adjacent.
template <int kHeadDim, int kRows, CacheKind kCache>
void launch_decode(const DecodeKernelParams& p, int64_t total_splits, void* stream, const std::string& context);

// The wgmma decode kernel (INT8 cache, d = 128, up to kDecodeWgmmaRows rows per CTA), the instance
// for `routes`.
void launch_decode_wgmma(const DecodeKernelParams& p, DecodeRoutes routes, int64_t total_splits, void* stream,
                         const std::string& context);

// The combine of multi-split sequences: one warp per (new token, query head).
void launch_decode_combine(const DecodeKernelParams& p, int d, int sm_count, void* stream, const std::string& context);

}  // namespace tilemix::gpu
