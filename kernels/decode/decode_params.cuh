#pragma once
// Device-side parameters of the decode kernels. Token and element offsets are 64-bit; positions
// inside one sequence are 32-bit (a cache holds fewer than 2^31 tokens per sequence).
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/common/mma.cuh"
#include "kernels/decode/decode_config.hpp"

namespace tilemix::gpu {

struct DecodeKernelParams {
  const __half* q;  // [total_new, hq, d]
  __half* o;        // [total_new, hq, d]
  float* lse;       // [hq, total_new], may be null
  const int64_t* cu_new;
  const int64_t* cache_len;
  const int64_t* cu_capacity;
  const int64_t* cu_blocks;
  const char* k;  // cache K and V: INT8 codes or FP16, [tokens, hk, d]
  const char* v;
  const float* k_scale;  // INT8 cache: [blocks, hk]
  const float* v_scale;
  const uint64_t* words;  // [hk][batch]
  const int* group;
  const int64_t* split_offset;
  const int* split_first_tile;  // [total splits]: the first key tile of each split in its sequence
  // Partial states of multi-split sequences, row ((split * hq + h) * kMaxDecodeTokens + i):
  // (m, l) and the unnormalized O.
  float2* ws_ml;
  float* ws_o;
  // Per sequence b, kDecodeArrivalStride apart: at b the decode CTAs that have written their
  // partial states, at batch + b the combine warps that have seen them all; zero between calls.
  // Used when per_sequence_combine is set; otherwise the combine waits for the whole decode grid.
  unsigned* arrivals;
  uint64_t* timeline;  // DecodeParams::timeline
  int per_sequence_combine;
  int64_t total_new;
  int64_t total_splits;
  int64_t cache_row_bytes;  // between consecutive tokens of one KV head
  int batch, hq, hk;
  int heads_per_kv;   // hq / hk
  int heads_per_cta;  // query heads of one CTA (all of a KV head's, unless rows would pass 128)
  int head_chunks;    // CTAs per KV head and split
  float scale_log2;  // softmax_scale * log2(e), rounded to fp32 once on the host
};

// The log-sum-exp of a finished row from its running maximum m (log2 domain) and sum l; -inf for
// a row without a legal key (unreachable in decode, where every row sees key 0).
__device__ __forceinline__ float decode_lse(float m, float l) {
  constexpr float kLn2 = 0.69314718055994530942f;
  return l == 0.0f ? -INFINITY : __fmul_rn(__fadd_rn(m, log2f(l)), kLn2);
}

// Output channels c .. c + 3 of (token, query head h): fp16(acc / l), 0 where l is; with channel 0
// the row's LSE.
template <int D>
__device__ __forceinline__ void store_decode_output(const DecodeKernelParams& p, int64_t token, int h, int c,
                                                    float4 acc, float m, float l) {
  uint2 out = make_uint2(0u, 0u);
  if (l != 0.0f) {
    out.x = pack_half2(__fdiv_rn(acc.x, l), __fdiv_rn(acc.y, l));
    out.y = pack_half2(__fdiv_rn(acc.z, l), __fdiv_rn(acc.w, l));
  }
  *reinterpret_cast<uint2*>(p.o + (token * p.hq + h) * D + c) = out;
  if (c == 0 && p.lse != nullptr) p.lse[static_cast<int64_t>(h) * p.total_new + token] = decode_lse(m, l);
}

// Largest b with offsets[b] <= x, offsets ascending with offsets[0] = 0 <= x.
__device__ __forceinline__ int find_sequence(const int64_t* offsets, int batch, int64_t x) {
  int lo = 0, hi = batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= x) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// The same, found by a whole warp (every lane calls it, with its lane index): 32 offsets per
// memory round trip instead of one dependent load per bisection step. It heads the chain of
// dependent loads that a decode CTA waits through before its first cache tile is requested.
__device__ __forceinline__ int find_sequence_warp(const int64_t* offsets, int batch, int64_t x, int lane) {
  int b = 0;
  for (int first = 0; first < batch; first += 32) {
    const bool at_or_below = first + lane < batch && offsets[first + lane] <= x;
    const unsigned below = __ballot_sync(0xffffffffu, at_or_below);  // a prefix of the lanes
    if (below != 0u) b = first + 31 - __clz(below);
    if (below != 0xffffffffu) break;
  }
  return b;
}

// A decode CTA of a multi-split sequence, after every thread's workspace writes: one arrival for
// sequence b. The barrier orders every thread's writes before thread 0's add, whose release at
// GPU scope is cumulative: a combine warp that acquires the count sees them all.
__device__ __forceinline__ void signal_partials_written(const DecodeKernelParams& p, int b, int tid) {
  if (!p.per_sequence_combine) return;
  __syncthreads();
  if (tid == 0) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(p.arrivals + b * kDecodeArrivalStride) : "memory");
  }
}

}  // namespace tilemix::gpu
