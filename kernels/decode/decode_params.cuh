#pragma once
// Device-side parameters of the decode kernels. Token and element offsets are 64-bit; positions
// inside one sequence are 32-bit (a cache holds fewer than 2^31 tokens per sequence).
#include <cuda_fp16.h>

#include <cstdint>

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
  // Partial states of multi-split sequences, row ((split * hq + h) * kMaxDecodeTokens + i):
  // (m, l) and the unnormalized O.
  float2* ws_ml;
  float* ws_o;
  int64_t total_new;
  int64_t cache_row_bytes;  // between consecutive tokens of one KV head
  int batch, hq, hk;
  int heads_per_kv;   // hq / hk
  int heads_per_cta;  // query heads of one CTA (all of a KV head's, unless rows would pass 128)
  int head_chunks;    // CTAs per KV head and split
  int tiles_per_split;
  float scale_log2;  // softmax_scale * log2(e), rounded to fp32 once on the host
};

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

}  // namespace tilemix::gpu
