#pragma once
// Device-side parameters of one prefill launch and the per-CTA view of the problem (sequence,
// head, query tile). Token offsets into Q/K/V/O are 64-bit: total_q * hq * d may exceed 2^31.
// Positions inside one sequence are 32-bit (a sequence is shorter than 2^31 tokens).
#include <cuda_fp16.h>

#include <cstdint>

namespace tilemix::gpu {

struct KernelParams {
  const __half* q;
  const __half* k;
  const __half* v;
  __half* o;
  float* lse;  // may be null
  const int64_t* cu_seqlens_q;
  const int64_t* cu_seqlens_k;
  // Routing (tilemix only).
  const uint64_t* words;
  const int64_t* tile_offset;
  const int* group;
  int64_t total_query_tiles;
  // quantize_once operands.
  const int8_t* q8;
  const int8_t* k8;
  const float* q_scale;
  const float* k_scale;
  const int64_t* q_block_offset;
  const int64_t* k_block_offset;
  int64_t total_q;
  // Bytes between consecutive tokens of one head: Q and O, K and V, and their INT8 codes. Read
  // from the parameter bank where used, so they occupy no registers in the mainloop.
  int64_t q_row_bytes, kv_row_bytes, q8_row_bytes, k8_row_bytes;
  int hq, hk;
  int heads_per_kv;  // hq / hk
  float scale_log2;  // softmax_scale * log2(e), rounded to fp32 once on the host
  bool causal;
  bool fp16_state;   // m, l, O rounded to fp16 after every key tile
  // FP8 P V operands (pv fp8 / routed, quantize_values_fp8): V8 [hk][d][v8_columns] in the FP8
  // MMA's key order, scales [k blocks][hk][d]. After the fields above, so that those keep their
  // offsets.
  const uint8_t* v8;
  const float* v_scale;
  int64_t v8_columns;
  // The warp-specialized kernel's work tile counters (PrefillParams::work_tile_counters), or null.
  unsigned long long* work_tile_counters;
};

// What one CTA works on: query tile m of head h of sequence b. Kept small: it lives in registers
// through the mainloop, next to the accumulators.
struct BlockInfo {
  int b, h, kv_head, m;
  int lq, lk;
  int rows;       // query rows of the tile inside the sequence (<= BLOCK_M)
  int key_tiles;  // key tiles 0 .. key_tiles-1 hold every key visible to some row of the tile

  // False when the tile lies past its sequence's end (the CTA has nothing to do).
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ bool init(const KernelParams& p) {
    // Highest query tiles first: under a causal mask they carry the most keys, so the longest
    // CTAs start earliest and the tail of the grid is short.
    return init_at<kBlockM, kBlockN>(p, blockIdx.y, gridDim.x - 1 - blockIdx.x, blockIdx.z);
  }

  // The same for query tile m_ of head h_ of sequence b_ (a persistent CTA's work tile).
  template <int kBlockM, int kBlockN>
  __device__ __forceinline__ bool init_at(const KernelParams& p, int h_, int m_, int b_) {
    b = b_;
    h = h_;
    m = m_;
    lq = static_cast<int>(p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b]);
    const int row0 = m * kBlockM;
    if (row0 >= lq) return false;
    kv_head = h / p.heads_per_kv;
    lk = static_cast<int>(p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b]);
    rows = min(kBlockM, lq - row0);
    const int key_end = p.causal ? max(0, min(lk, row0 + rows + diagonal())) : lk;
    key_tiles = (key_end + kBlockN - 1) / kBlockN;
    return true;
  }

  // Query i sees key j iff j <= i + diagonal() (causal, bottom-right aligned).
  __device__ __forceinline__ int diagonal() const { return lk - lq; }
  template <int kBlockM>
  __device__ __forceinline__ int row_begin() const { return m * kBlockM; }
  // Global token index of the tile's first query row and of the sequence's first key.
  template <int kBlockM>
  __device__ __forceinline__ int64_t q_token0(const KernelParams& p) const {
    return p.cu_seqlens_q[b] + row_begin<kBlockM>();
  }
  __device__ __forceinline__ int64_t k_token0(const KernelParams& p) const { return p.cu_seqlens_k[b]; }
  // Element offsets of the tile's first query row of head h, and of the sequence's first key of
  // the KV head (64-bit: total * heads * d may pass 2^31).
  template <int kBlockM>
  __device__ __forceinline__ int64_t q_first(const KernelParams& p, int d) const {
    return q_token0<kBlockM>(p) * p.hq * d + static_cast<int64_t>(h) * d;
  }
  __device__ __forceinline__ int64_t k_first(const KernelParams& p, int d) const {
    return k_token0(p) * p.hk * d + static_cast<int64_t>(kv_head) * d;
  }
};

}  // namespace tilemix::gpu
