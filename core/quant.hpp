#pragma once
// Blockwise symmetric INT8 quantization on the CPU (SPEC 5), bit-identical to the GPU kernels.
#include <cstdint>
#include <vector>

#include "core/fp16.hpp"
#include "core/problem.hpp"

namespace tilemix {

constexpr int kBlockQ = 128;  // BLKQ: query tokens per scale block
constexpr int kBlockK = 64;   // BLKK: key tokens per scale block

// scale = max|x| / 127 in FP32 (correctly rounded division).
inline float int8_scale(float absmax) { return absmax / 127.0f; }

// Code of x under `scale`: round-to-nearest-even of x / scale (correctly rounded FP32 division,
// no reciprocal multiply), clamped to [-127, 127]; 0 for an all-zero block (scale 0).
int8_t int8_code(float x, float scale);

// Codes have the layout of the input ([total, heads, d]); scales are [sum_b ceil(L_b/blk), heads]
// with block_offset[b] the first scale row of sequence b (B+1 entries).
struct QuantizedTensor {
  int heads = 0;
  int d = 0;
  int blk = 0;
  std::vector<int8_t> codes;
  std::vector<float> scales;
  std::vector<int64_t> block_offset;

  float scale(int b, int64_t token_in_seq, int h) const {
    return scales[(block_offset[b] + token_in_seq / blk) * heads + h];
  }
};

// Scale-block prefix sums for sequences given by `cu_seqlens` (blocks restart at each sequence).
std::vector<int64_t> scale_block_offsets(const std::vector<int64_t>& cu_seqlens, int blk);

// x: FP16 bits, [total, heads, d]. Uses both cores.
QuantizedTensor quantize_blockwise(const std::vector<uint16_t>& x, const std::vector<int64_t>& cu_seqlens,
                                   int heads, int d, int blk);

// ---- Key smoothing (smooth_k, SPEC 5) ----
// The numerics that the GPU smoothing pass (kernels/quant/smooth_keys.cu) follows bit for bit;
// docs/kernels.md ("Key smoothing") states them. Both score paths then read the smoothed keys Ks
// in place of K: the FP16 path as it reads K, the INT8 path through quantize_blockwise of Ks.
//
// kbar[b][h][c]: per BLKK key block of sequence b (the K scale blocks; the last may be partial)
// the sequential fp32 sum of float(K) over the block's tokens in token order, starting from 0;
// then the sequential fp32 sum of these partials in block order, starting from 0; then one fp32
// division by float(L_b) (round to nearest). A sequence without keys has kbar = 0. A GPU pass
// does one thread per (block, channel), then one per channel, with the same operations.
// k, kbar: FP16 bits [total_k, hk, d]; fp32 [batch, hk, d].
std::vector<float> key_means(const std::vector<uint16_t>& k, const std::vector<int64_t>& cu_seqlens_k, int hk, int d);

// A smoothed key: fp16(fp32(k - kbar)), a rounded fp32 subtract, then rounded to FP16 (RNE).
inline uint16_t smoothed_key(float k, float kbar) { return float_to_half(k - kbar); }

// Ks[t][h][c] = smoothed_key(float(k[t][h][c]), kbar[b][h][c]) of key token t of sequence b:
// FP16 bits [total_k, hk, d].
std::vector<uint16_t> smoothed_keys(const std::vector<uint16_t>& k, const std::vector<int64_t>& cu_seqlens_k, int hk,
                                    int d, const std::vector<float>& kbar);

// qkbar[t][h] = q . kbar of query token t (sequence b) and query head h against kbar[b][kv head
// of h]: acc = fmaf(float(q[t][h][c]), kbar[b][hk(h)][c], acc) for c = 0..d-1 from acc = 0.
// q: FP16 bits [total_q, hq, d]; qkbar: fp32 [total_q, hq].
std::vector<float> query_key_means(const std::vector<uint16_t>& q, const std::vector<int64_t>& cu_seqlens_q, int hq,
                                   int hk, int d, const std::vector<float>& kbar);

// The log-sum-exp (natural log) of a smoothed row with keys: the product qkbar * softmax_scale
// rounded to fp32, then added in fp32 (two roundings, never one fma). A row without keys keeps
// lse = -inf: callers do not shift it.
inline float unsmoothed_lse(float lse, float qkbar, float softmax_scale) {
  const float shift = qkbar * softmax_scale;
  return lse + shift;
}

// Everything smooth_k adds to an attention call.
struct SmoothedKeys {
  std::vector<float> kbar;   // [batch, hk, d]
  std::vector<float> qkbar;  // [total_q, hq]
  std::vector<uint16_t> ks;  // Ks, FP16 bits [total_k, hk, d]
};

// `shape` validated; q, k: FP16 bits of its Q and K.
SmoothedKeys smooth_keys(const AttentionShape& shape, const std::vector<uint16_t>& q, const std::vector<uint16_t>& k);

}  // namespace tilemix
