// Key smoothing (smooth_k): kbar, qkbar and the smoothed keys Ks, bit-identical with key_means,
// query_key_means and smoothed_keys (core/quant.hpp), whose operations they repeat in the same
// order with rounded intrinsics, so that nothing is contracted or reordered; and the LSE's shift
// back by q . kbar, which the routed kernel's call adds after the unchanged attention kernel.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/quant.hpp"
#include "kernels/common/check.cuh"
#include "kernels/common/sequence_lookup.cuh"
#include "kernels/prefill/tile_sizes.hpp"
#include "kernels/quant/smooth_keys.hpp"
#include "tilemix/attention.hpp"

namespace tilemix::gpu {
namespace {

constexpr int kElementwiseThreads = 128;
// Grids of at most 2^20 CTAs stride over longer inputs.
constexpr int64_t kMaxElementwiseCtas = int64_t{1} << 20;

unsigned elementwise_ctas(int64_t items) {
  return static_cast<unsigned>(
      std::min<int64_t>((items + kElementwiseThreads - 1) / kElementwiseThreads, kMaxElementwiseCtas));
}

// kbar, first step: one thread per (K scale block, channel) of a head (grid: blocks x hk, kDim
// threads) sums float(K) over the block's tokens in token order from 0. partial: [blocks, hk, d].
template <int kDim>
__global__ void __launch_bounds__(kDim)
    key_block_sums_kernel(const __half* __restrict__ k, float* __restrict__ partial,
                          const int64_t* __restrict__ cu_seqlens, const int64_t* __restrict__ block_offset, int batch,
                          int heads) {
  const int64_t block = blockIdx.x;
  const int h = blockIdx.y, c = threadIdx.x;
  const int b = find_sequence(block_offset, batch, block);
  const int64_t token0 = cu_seqlens[b] + (block - block_offset[b]) * kBlockK;
  const int rows = static_cast<int>(min(static_cast<int64_t>(kBlockK), cu_seqlens[b + 1] - token0));
  const int64_t stride = static_cast<int64_t>(heads) * kDim;
  const __half* src = k + token0 * stride + static_cast<int64_t>(h) * kDim + c;
  float sum = 0.0f;
  for (int r = 0; r < rows; ++r) sum = __fadd_rn(sum, __half2float(src[r * stride]));
  partial[(block * heads + h) * kDim + c] = sum;
}

// kbar, second step: one thread per (sequence, channel) of a head (grid: batch x hk, kDim
// threads) sums the sequence's block partials in block order from 0 and divides by float(L_b)
// (0 for a sequence without keys). kbar: [batch, hk, d].
template <int kDim>
__global__ void __launch_bounds__(kDim)
    key_means_kernel(const float* __restrict__ partial, float* __restrict__ kbar,
                     const int64_t* __restrict__ cu_seqlens, const int64_t* __restrict__ block_offset, int heads) {
  const int b = blockIdx.x, h = blockIdx.y, c = threadIdx.x;
  float total = 0.0f;
  for (int64_t block = block_offset[b]; block < block_offset[b + 1]; ++block) {
    total = __fadd_rn(total, partial[(block * heads + h) * kDim + c]);
  }
  const int64_t len = cu_seqlens[b + 1] - cu_seqlens[b];
  kbar[(static_cast<int64_t>(b) * heads + h) * kDim + c] = len == 0 ? 0.0f : __fdiv_rn(total, __ll2float_rn(len));
}

// Ks: one thread per 8 channels of a key row, fp16(fp32(k - kbar)) of each. k, ks: [total_k, hk,
// d]; kbar: [batch, hk, d] (rows 32-byte aligned: d is a multiple of 8).
template <int kDim>
__global__ void __launch_bounds__(kElementwiseThreads)
    smoothed_keys_kernel(const __half* __restrict__ k, const float* __restrict__ kbar, __half* __restrict__ ks,
                         const int64_t* __restrict__ cu_seqlens, int batch, int64_t total_k, int heads) {
  constexpr int kChunksPerHead = kDim / 8;
  const int64_t chunks_per_token = static_cast<int64_t>(heads) * kChunksPerHead;
  const int64_t chunks = total_k * chunks_per_token;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kElementwiseThreads + threadIdx.x; i < chunks;
       i += static_cast<int64_t>(gridDim.x) * kElementwiseThreads) {
    const int64_t t = i / chunks_per_token;
    const int h = static_cast<int>(i % chunks_per_token) / kChunksPerHead;
    const int c8 = static_cast<int>(i % kChunksPerHead);
    const int b = find_sequence(cu_seqlens, batch, t);
    const float* mean = kbar + (static_cast<int64_t>(b) * heads + h) * kDim + c8 * 8;
    const float4 m0 = *reinterpret_cast<const float4*>(mean), m1 = *reinterpret_cast<const float4*>(mean + 4);
    const float m[8] = {m0.x, m0.y, m0.z, m0.w, m1.x, m1.y, m1.z, m1.w};
    const uint4 chunk = reinterpret_cast<const uint4*>(k)[i];
    uint32_t w[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[j]));
      const uint32_t lo = __half_as_ushort(__float2half_rn(__fsub_rn(f.x, m[2 * j])));
      const uint32_t hi = __half_as_ushort(__float2half_rn(__fsub_rn(f.y, m[2 * j + 1])));
      w[j] = lo | hi << 16;
    }
    reinterpret_cast<uint4*>(ks)[i] = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// qkbar: one thread per (query token, query head), the fmaf chain over the channels in order.
// qkbar: [total_q, hq].
template <int kDim>
__global__ void __launch_bounds__(kElementwiseThreads)
    query_key_means_kernel(const __half* __restrict__ q, const float* __restrict__ kbar, float* __restrict__ qkbar,
                           const int64_t* __restrict__ cu_seqlens_q, int batch, int64_t total_q, int hq, int hk) {
  const int group = hq / hk;
  const int64_t rows = total_q * hq;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kElementwiseThreads + threadIdx.x; i < rows;
       i += static_cast<int64_t>(gridDim.x) * kElementwiseThreads) {
    const int64_t t = i / hq;
    const int h = static_cast<int>(i % hq);
    const int b = find_sequence(cu_seqlens_q, batch, t);
    const uint4* row = reinterpret_cast<const uint4*>(q + i * kDim);
    const float* mean = kbar + (static_cast<int64_t>(b) * hk + h / group) * kDim;
    float acc = 0.0f;
#pragma unroll 4
    for (int c8 = 0; c8 < kDim / 8; ++c8) {
      const uint4 chunk = row[c8];
      const uint32_t w[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[j]));
        acc = __fmaf_rn(f.x, mean[c8 * 8 + 2 * j], acc);
        acc = __fmaf_rn(f.y, mean[c8 * 8 + 2 * j + 1], acc);
      }
    }
    qkbar[i] = acc;
  }
}

// unsmoothed_lse of every row with keys: lse [hq, total_q] (as the epilogue writes it), qkbar
// [total_q, hq]; -inf (a row without keys) stays.
__global__ void __launch_bounds__(kElementwiseThreads)
    unsmoothed_lse_kernel(float* __restrict__ lse, const float* __restrict__ qkbar, int64_t total_q, int hq,
                          float softmax_scale) {
  const int64_t rows = total_q * hq;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kElementwiseThreads + threadIdx.x; i < rows;
       i += static_cast<int64_t>(gridDim.x) * kElementwiseThreads) {
    const int h = static_cast<int>(i / total_q);
    const int64_t t = i % total_q;
    const float value = lse[i];
    if (value != -INFINITY) lse[i] = __fadd_rn(value, __fmul_rn(qkbar[t * hq + h], softmax_scale));
  }
}

template <int kDim>
void launch_smooth_keys(const PrefillParams& p, cudaStream_t stream, const std::string& context) {
  const auto* k = static_cast<const __half*>(p.k);
  const auto* q = static_cast<const __half*>(p.q);
  if (p.k_blocks > 0) {
    const dim3 grid(static_cast<unsigned>(p.k_blocks), static_cast<unsigned>(p.hk));
    key_block_sums_kernel<kDim>
        <<<grid, kDim, 0, stream>>>(k, p.kbar_partial, p.cu_seqlens_k, p.k_block_offset, p.batch, p.hk);
    TILEMIX_LAUNCH_CHECK("key_block_sums_kernel", context);
  }
  const dim3 seq_grid(static_cast<unsigned>(p.batch), static_cast<unsigned>(p.hk));
  key_means_kernel<kDim><<<seq_grid, kDim, 0, stream>>>(p.kbar_partial, p.kbar, p.cu_seqlens_k, p.k_block_offset, p.hk);
  TILEMIX_LAUNCH_CHECK("key_means_kernel", context);
  if (p.total_k > 0) {
    smoothed_keys_kernel<kDim><<<elementwise_ctas(p.total_k * p.hk * (kDim / 8)), kElementwiseThreads, 0, stream>>>(
        k, p.kbar, static_cast<__half*>(p.k_smoothed), p.cu_seqlens_k, p.batch, p.total_k, p.hk);
    TILEMIX_LAUNCH_CHECK("smoothed_keys_kernel", context);
  }
  if (p.total_q > 0) {
    query_key_means_kernel<kDim><<<elementwise_ctas(p.total_q * p.hq), kElementwiseThreads, 0, stream>>>(
        q, p.kbar, p.qkbar, p.cu_seqlens_q, p.batch, p.total_q, p.hq, p.hk);
    TILEMIX_LAUNCH_CHECK("query_key_means_kernel", context);
  }
}

}  // namespace

void smooth_keys(const PrefillParams& p, void* stream) {
  const std::string context = "smooth_keys(d=" + std::to_string(p.d) + " hq=" + std::to_string(p.hq) +
                              " hk=" + std::to_string(p.hk) + " batch=" + std::to_string(p.batch) +
                              " total_q=" + std::to_string(p.total_q) + " total_k=" + std::to_string(p.total_k) +
                              " k_blocks=" + std::to_string(p.k_blocks) + ")";
  if (!prefill_supports_head_dim(p.d)) {
    throw std::invalid_argument(context + ": unsupported head dimension d=" + std::to_string(p.d) +
                                " (supported: 64, 128)");
  }
  if (p.hq <= 0 || p.hk <= 0 || p.hq > 65535 || p.hk > 65535 || p.hq % p.hk != 0 || p.batch < 0 ||
      p.batch > 0x7fffffff || p.k_blocks < 0 || p.k_blocks > 0x7fffffff || p.total_q < 0 || p.total_k < 0) {
    throw std::invalid_argument(context + ": heads (hq a multiple of hk), batch, lengths or block counts out of range");
  }
  if (p.batch == 0) return;
  // Empty tensors may come without buffers: no keys need no block sums and no Ks, no queries no qkbar.
  const bool keys = p.total_k > 0, queries = p.total_q > 0;
  if (!p.kbar || !p.k_block_offset || !p.cu_seqlens_q || !p.cu_seqlens_k ||
      (keys && (!p.k || !p.kbar_partial || !p.k_smoothed)) || (queries && (!p.q || !p.qkbar))) {
    throw std::invalid_argument(context +
                                ": kbar, k_block_offset, cu_seqlens, and with keys k, kbar_partial and k_smoothed, "
                                "with queries q and qkbar must be device pointers");
  }
  const auto s = static_cast<cudaStream_t>(stream);
  if (p.d == 64) {
    launch_smooth_keys<64>(p, s, context);
  } else {
    launch_smooth_keys<128>(p, s, context);
  }
}

void add_query_key_means_to_lse(const PrefillParams& p, void* stream, const std::string& context) {
  const int64_t rows = p.total_q * p.hq;
  if (rows == 0 || !p.lse) return;
  if (!p.qkbar) throw std::invalid_argument(context + ": smooth_k needs qkbar (written by smooth_keys)");
  unsmoothed_lse_kernel<<<elementwise_ctas(rows), kElementwiseThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      p.lse, p.qkbar, p.total_q, p.hq, p.softmax_scale);
  TILEMIX_LAUNCH_CHECK("unsmoothed_lse_kernel", context);
}

}  // namespace tilemix::gpu
