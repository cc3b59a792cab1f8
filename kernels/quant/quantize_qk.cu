// quantize_once's passes: blockwise INT8 codes and scales of Q (BLKQ = 128 tokens; for the kernels
// that read Q8, the warp-specialized one codes Q on chip) and K (BLKK = 64 tokens; the smoothed
// keys Ks with smooth_k), one CTA per (scale block, head), bit-identical with quantize_blockwise on
// the CPU.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

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

// x, codes: [total, heads, d]; scales: [blocks, heads]. Blocks are numbered over the whole batch
// (block_offset: B + 1 prefix sums); a CTA finds its sequence by binary search, so zero-length
// sequences (no blocks) cost nothing.
template <int kBlk, int kDim>
__global__ void __launch_bounds__(kQuantThreads)
    quantize_blocks_kernel(const __half* __restrict__ x, int8_t* __restrict__ codes, float* __restrict__ scales,
                           const int64_t* __restrict__ cu_seqlens, const int64_t* __restrict__ block_offset,
                           int batch, int heads) {
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
  float absmax = 0.0f;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int idx = tid + i * kQuantThreads;
    const int row = idx / kChunksPerRow, c = idx % kChunksPerRow;
    chunk[i] = row < rows ? *reinterpret_cast<const uint4*>(x + first + row * stride + c * 8) : make_uint4(0, 0, 0, 0);
    absmax = absmax8(chunk[i], absmax);
  }
  const float scale = int8_block_scale(block_absmax<kQuantThreads / 32>(absmax, scratch));
  const Int8Encoder encoder(scale);
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int idx = tid + i * kQuantThreads;
    const int row = idx / kChunksPerRow, c = idx % kChunksPerRow;
    if (row < rows) *reinterpret_cast<uint2*>(codes + first + row * stride + c * 8) = encoder.encode8(chunk[i]);
  }
  if (tid == 0) scales[block * heads + h] = scale;
}

template <int kBlk>
void launch_quantize(const void* x, int8_t* codes, float* scales, const int64_t* cu_seqlens,
                     const int64_t* block_offset, int64_t blocks, int batch, int heads, int d, cudaStream_t stream,
                     const std::string& context) {
  if (blocks == 0) return;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(heads));
  const auto* xh = static_cast<const __half*>(x);
  if (d == 64) {
    quantize_blocks_kernel<kBlk, 64>
        <<<grid, kQuantThreads, 0, stream>>>(xh, codes, scales, cu_seqlens, block_offset, batch, heads);
  } else {
    quantize_blocks_kernel<kBlk, 128>
        <<<grid, kQuantThreads, 0, stream>>>(xh, codes, scales, cu_seqlens, block_offset, batch, heads);
  }
  TILEMIX_LAUNCH_CHECK("quantize_blocks_kernel",
                       context + " blk=" + std::to_string(kBlk) + " grid=(" + std::to_string(grid.x) + "," +
                           std::to_string(grid.y) + ")");
}

std::string describe(const PrefillParams& p, const char* pass) {
  return std::string(pass) + "(d=" + std::to_string(p.d) + " hq=" + std::to_string(p.hq) +
         " hk=" + std::to_string(p.hk) + " batch=" + std::to_string(p.batch) +
         " total_q=" + std::to_string(p.total_q) + " total_k=" + std::to_string(p.total_k) +
         " q_blocks=" + std::to_string(p.q_blocks) + " k_blocks=" + std::to_string(p.k_blocks) +
         (p.numerics.smooth_k ? " smooth_k" : "") + ")";
}

// What both passes check; false when there is nothing to code.
bool validate(const PrefillParams& p, int heads, int64_t blocks, const std::string& context) {
  if (!prefill_supports_head_dim(p.d)) {
    throw std::invalid_argument(context + ": unsupported head dimension d=" + std::to_string(p.d) +
                                " (supported: 64, 128)");
  }
  if (heads <= 0 || heads > 65535 || p.batch < 0 || blocks < 0 || blocks > 0x7fffffff) {
    throw std::invalid_argument(context + ": heads, batch or block count out of range");
  }
  return p.batch > 0 && blocks > 0;
}

}  // namespace

void quantize_queries(const PrefillParams& p, void* stream) {
  const std::string context = describe(p, "quantize_queries");
  if (!validate(p, p.hq, p.q_blocks, context)) return;
  if (!p.q || !p.q8 || !p.q_scale || !p.q_block_offset || !p.cu_seqlens_q) {
    throw std::invalid_argument(context + ": q, q8, q_scale, q_block_offset and cu_seqlens_q must be device pointers");
  }
  launch_quantize<kBlockQ>(p.q, p.q8, p.q_scale, p.cu_seqlens_q, p.q_block_offset, p.q_blocks, p.batch, p.hq, p.d,
                           static_cast<cudaStream_t>(stream), context);
}

void quantize_keys(const PrefillParams& p, void* stream) {
  const std::string context = describe(p, "quantize_keys");
  if (!validate(p, p.hk, p.k_blocks, context)) return;
  if (!p.k || !p.k8 || !p.k_scale || !p.k_block_offset || !p.cu_seqlens_k) {
    throw std::invalid_argument(context + ": k, k8, k_scale, k_block_offset and cu_seqlens_k must be device pointers");
  }
  if (p.numerics.smooth_k && !p.k_smoothed) {
    throw std::invalid_argument(context + ": smooth_k codes the smoothed keys: k_smoothed must be a device pointer "
                                          "(written by smooth_keys)");
  }
  const void* keys = p.numerics.smooth_k ? p.k_smoothed : p.k;
  launch_quantize<kBlockK>(keys, p.k8, p.k_scale, p.cu_seqlens_k, p.k_block_offset, p.k_blocks, p.batch, p.hk, p.d,
                           static_cast<cudaStream_t>(stream), context);
}

}  // namespace tilemix::gpu
