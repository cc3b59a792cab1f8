// quantize_once: blockwise INT8 codes and scales of Q (BLKQ = 128 tokens) and K (BLKK = 64
// tokens), one CTA per (scale block, head), bit-identical with quantize_blockwise on the CPU.
// Key smoothing (smooth_keys): kbar, qkbar and the codes of K - kbar, bit-identical with
// key_means, query_key_means and quantize_smoothed_keys (core/quant.hpp), whose operations they
// repeat in the same order with rounded intrinsics, so that nothing is contracted or reordered.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/quant.hpp"
#include "kernels/common/check.cuh"
#include "kernels/common/sequence_lookup.cuh"
#include "kernels/prefill/tile_sizes.hpp"
#include "kernels/quant/int8_codes.cuh"
#include "tilemix/attention.hpp"

namespace tilemix::gpu {
namespace {

constexpr int kQuantThreads = 128;
constexpr int kQueryMeanThreads = 128;

// smoothed_key of 8 packed halves against their 8 channel means (32-byte aligned).
__device__ __forceinline__ void smooth8(const uint4& chunk, const float* __restrict__ mean, float (&out)[8]) {
  const uint32_t w[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
  const float4 m0 = *reinterpret_cast<const float4*>(mean), m1 = *reinterpret_cast<const float4*>(mean + 4);
  const float m[8] = {m0.x, m0.y, m0.z, m0.w, m1.x, m1.y, m1.z, m1.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
    out[2 * i] = __fsub_rn(f.x, m[2 * i]);
    out[2 * i + 1] = __fsub_rn(f.y, m[2 * i + 1]);
  }
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

// qkbar: one thread per (query token, query head), the fmaf chain over the channels in order.
// qkbar: [total_q, hq].
template <int kDim>
__global__ void __launch_bounds__(kQueryMeanThreads)
    query_key_means_kernel(const __half* __restrict__ q, const float* __restrict__ kbar, float* __restrict__ qkbar,
                           const int64_t* __restrict__ cu_seqlens_q, int batch, int64_t total_q, int hq, int hk) {
  const int group = hq / hk;
  const int64_t rows = total_q * hq;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kQueryMeanThreads + threadIdx.x; i < rows;
       i += static_cast<int64_t>(gridDim.x) * kQueryMeanThreads) {
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

// x, codes: [total, heads, d]; scales: [blocks, heads]. Blocks are numbered over the whole batch
// (block_offset: B + 1 prefix sums); a CTA finds its sequence by binary search, so zero-length
// sequences (no blocks) cost nothing. kSmooth: the codes and scales of x - kbar ([batch, heads,
// d]), each element one rounded subtract, instead of x's.
template <int kBlk, int kDim, bool kSmooth>
__global__ void __launch_bounds__(kQuantThreads)
    quantize_blocks_kernel(const __half* __restrict__ x, int8_t* __restrict__ codes, float* __restrict__ scales,
                           const int64_t* __restrict__ cu_seqlens, const int64_t* __restrict__ block_offset,
                           const float* __restrict__ kbar, int batch, int heads) {
  constexpr int kChunksPerRow = kDim / 8;  // 16-byte chunks of 8 halves
  constexpr int kPerThread = kBlk * kChunksPerRow / kQuantThreads;
  __shared__ float scratch[kQuantThreads / 32];
  const int64_t block = blockIdx.x;
  const int h = blockIdx.y;
  const int tid = threadIdx.x;

  const int b = find_sequence(block_offset, batch, block);  // the last sequence whose first block is <= block
  const int64_t token0 = cu_seqlens[b] + (block - block_offset[b]) * kBlk;
  const int rows = static_cast<int>(min(static_cast<int64_t>(kBlk), cu_seqlens[b + 1] - token0));
  const int64_t stride = static_cast<int64_t>(heads) * kDim;
  const int64_t first = token0 * stride + static_cast<int64_t>(h) * kDim;

  uint4 chunk[kPerThread];
  float smoothed[kSmooth ? kPerThread : 1][8];
  float absmax = 0.0f;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int idx = tid + i * kQuantThreads;
    const int row = idx / kChunksPerRow, c = idx % kChunksPerRow;
    chunk[i] = row < rows ? *reinterpret_cast<const uint4*>(x + first + row * stride + c * 8) : make_uint4(0, 0, 0, 0);
    if constexpr (kSmooth) {
      smooth8(chunk[i], kbar + (static_cast<int64_t>(b) * heads + h) * kDim + c * 8, smoothed[i]);
      // Rows past the block's end are not keys: 0 - kbar must not widen the scale.
      if (row < rows) absmax = absmax8(smoothed[i], absmax);
    } else {
      absmax = absmax8(chunk[i], absmax);
    }
  }
  const float scale = int8_block_scale(block_absmax<kQuantThreads / 32>(absmax, scratch));
  const Int8Encoder encoder(scale);
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int idx = tid + i * kQuantThreads;
    const int row = idx / kChunksPerRow, c = idx % kChunksPerRow;
    if (row >= rows) continue;
    uint2* dst = reinterpret_cast<uint2*>(codes + first + row * stride + c * 8);
    if constexpr (kSmooth) {
      *dst = encoder.encode8(smoothed[i]);
    } else {
      *dst = encoder.encode8(chunk[i]);
    }
  }
  if (tid == 0) scales[block * heads + h] = scale;
}

template <int kBlk, bool kSmooth>
void launch_quantize(const void* x, int8_t* codes, float* scales, const int64_t* cu_seqlens,
                     const int64_t* block_offset, const float* kbar, int64_t blocks, int batch, int heads, int d,
                     cudaStream_t stream, const std::string& context) {
  if (blocks == 0) return;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(heads));
  const auto* xh = static_cast<const __half*>(x);
  if (d == 64) {
    quantize_blocks_kernel<kBlk, 64, kSmooth>
        <<<grid, kQuantThreads, 0, stream>>>(xh, codes, scales, cu_seqlens, block_offset, kbar, batch, heads);
  } else {
    quantize_blocks_kernel<kBlk, 128, kSmooth>
        <<<grid, kQuantThreads, 0, stream>>>(xh, codes, scales, cu_seqlens, block_offset, kbar, batch, heads);
  }
  TILEMIX_LAUNCH_CHECK("quantize_blocks_kernel",
                       context + " blk=" + std::to_string(kBlk) + (kSmooth ? " smooth_k" : "") + " grid=(" +
                           std::to_string(grid.x) + "," + std::to_string(grid.y) + ")");
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
  const int64_t rows = p.total_q * p.hq;
  if (rows == 0) return;
  // A grid of at most 2^20 CTAs strides over longer inputs.
  const int64_t ctas = std::min<int64_t>((rows + kQueryMeanThreads - 1) / kQueryMeanThreads, int64_t{1} << 20);
  query_key_means_kernel<kDim><<<static_cast<unsigned>(ctas), kQueryMeanThreads, 0, stream>>>(
      q, p.kbar, p.qkbar, p.cu_seqlens_q, p.batch, p.total_q, p.hq, p.hk);
  TILEMIX_LAUNCH_CHECK("query_key_means_kernel", context);
}

std::string quant_context(const char* name, const PrefillParams& p) {
  return std::string(name) + "(d=" + std::to_string(p.d) + " hq=" + std::to_string(p.hq) +
         " hk=" + std::to_string(p.hk) + " batch=" + std::to_string(p.batch) + " total_q=" + std::to_string(p.total_q) +
         " total_k=" + std::to_string(p.total_k) + " q_blocks=" + std::to_string(p.q_blocks) +
         " k_blocks=" + std::to_string(p.k_blocks) + (p.numerics.smooth_k ? " smooth_k" : "") + ")";
}

void check_quant_sizes(const PrefillParams& p, const std::string& context) {
  if (!prefill_supports_head_dim(p.d)) {
    throw std::invalid_argument(context + ": unsupported head dimension d=" + std::to_string(p.d) +
                                " (supported: 64, 128)");
  }
  if (p.hq <= 0 || p.hk <= 0 || p.hq > 65535 || p.hk > 65535 || p.batch < 0 || p.q_blocks < 0 || p.k_blocks < 0 ||
      p.q_blocks > 0x7fffffff || p.k_blocks > 0x7fffffff) {
    throw std::invalid_argument(context + ": heads, batch or block counts out of range");
  }
}

}  // namespace

void quantize_qk(const PrefillParams& p, void* stream) {
  const std::string context = quant_context("quantize_qk", p);
  check_quant_sizes(p, context);
  if (p.batch == 0 || (p.q_blocks == 0 && p.k_blocks == 0)) return;
  if (!p.q || !p.k || !p.q8 || !p.k8 || !p.q_scale || !p.k_scale || !p.q_block_offset || !p.k_block_offset ||
      !p.cu_seqlens_q || !p.cu_seqlens_k) {
    throw std::invalid_argument(context +
                                ": q, k, q8, k8, q_scale, k_scale, block offsets and cu_seqlens must be device pointers");
  }
  if (p.numerics.smooth_k && !p.kbar) {
    throw std::invalid_argument(context + ": smooth_k codes K - kbar: kbar must be a device pointer (smooth_keys)");
  }
  const auto s = static_cast<cudaStream_t>(stream);
  launch_quantize<kBlockQ, false>(p.q, p.q8, p.q_scale, p.cu_seqlens_q, p.q_block_offset, nullptr, p.q_blocks, p.batch,
                                  p.hq, p.d, s, context);
  if (p.numerics.smooth_k) {
    launch_quantize<kBlockK, true>(p.k, p.k8, p.k_scale, p.cu_seqlens_k, p.k_block_offset, p.kbar, p.k_blocks,
                                   p.batch, p.hk, p.d, s, context);
  } else {
    launch_quantize<kBlockK, false>(p.k, p.k8, p.k_scale, p.cu_seqlens_k, p.k_block_offset, nullptr, p.k_blocks,
                                    p.batch, p.hk, p.d, s, context);
  }
}

void smooth_keys(const PrefillParams& p, void* stream) {
  const std::string context = quant_context("smooth_keys", p);
  check_quant_sizes(p, context);
  if (p.batch == 0) return;
  if (p.hq % p.hk != 0) throw std::invalid_argument(context + ": hq must be a multiple of hk");
  // Empty tensors may come without buffers: no keys need no block sums, no queries no qkbar.
  const bool keys = p.k_blocks > 0, queries = p.total_q > 0;
  if (!p.kbar || !p.k_block_offset || !p.cu_seqlens_q || !p.cu_seqlens_k || (keys && (!p.k || !p.kbar_partial)) ||
      (queries && (!p.q || !p.qkbar))) {
    throw std::invalid_argument(context +
                                ": kbar, k_block_offset, cu_seqlens, and with keys k and kbar_partial, with queries q "
                                "and qkbar must be device pointers");
  }
  const auto s = static_cast<cudaStream_t>(stream);
  if (p.d == 64) {
    launch_smooth_keys<64>(p, s, context);
  } else {
    launch_smooth_keys<128>(p, s, context);
  }
}

}  // namespace tilemix::gpu
