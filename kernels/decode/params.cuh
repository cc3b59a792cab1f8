#pragma once
// Device-side parameters of the decode kernels. Token and element offsets are 64-bit; positions
// inside one sequence are 32-bit (a cache holds fewer than 2^31 tokens per sequence).
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/decode/config.hpp"

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

}  // namespace tilemix::gpu
