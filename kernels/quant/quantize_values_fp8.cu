// pv fp8 / routed: V in FP8 E4M3 per channel and 128 keys (two 64-key blocks), in the layout the
// FP8 MMA reads (core/quant_fp8.hpp: per KV head and channel a row of keys, each 32 keys in the P
// fragment's order, every sequence from a block boundary, padding code 0), bit-identical with
// quantize_values_fp8 on the CPU. One CTA per (scale block, KV head), launched per V block (the
// second block of a pair returns at once): the pair's V is staged in shared memory, each
// channel's scale taken over its keys and written for both blocks, and each thread writes 16
// bytes of a channel's row at a time.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "core/quant.hpp"
#include "core/quant_fp8.hpp"
#include "kernels/common/check.cuh"
#include "kernels/common/sequence_lookup.cuh"
#include "kernels/prefill/tile_sizes.hpp"
#include "tilemix/attention.hpp"

namespace tilemix::gpu {
namespace {

static_assert(kBlockV == kBlockK, "V blocks are the K scale blocks: they share k_block_offset");
constexpr int kValueThreads = 128;

// e4m3(fp32(x / scale)), RNE with saturation; 0 for scale 0 (an all-zero channel of the block).
__device__ __forceinline__ uint32_t fp8_value_code(float x, float scale) {
  if (scale == 0.0f) return 0u;
  return __nv_cvt_float_to_fp8(__fdiv_rn(x, scale), __NV_SATFINITE, __NV_E4M3);
}

template <int kDim>
__global__ void __launch_bounds__(kValueThreads)
    quantize_values_kernel(const __half* __restrict__ v, uint8_t* __restrict__ codes, float* __restrict__ scales,
                           const int64_t* __restrict__ cu_seqlens, const int64_t* __restrict__ block_offset,
                           int batch, int heads, int64_t columns) {
  constexpr int kPair = kVScaleKeys / kBlockV;
  constexpr int kChunks = kVScaleKeys * kDim / 8;  // 16-byte chunks of the pair's [128][kDim] halves
  __shared__ __half tile[kVScaleKeys][kDim];
  __shared__ float channel_scale[kDim];
  const int64_t block = blockIdx.x;
  const int h = blockIdx.y, tid = threadIdx.x;
  const int b = find_sequence(block_offset, batch, block);
  if ((block - block_offset[b]) % kPair != 0) return;  // the pair's first block codes both
  const int blocks = static_cast<int>(min(static_cast<int64_t>(kPair), block_offset[b + 1] - block));
  const int64_t key0 = cu_seqlens[b] + (block - block_offset[b]) * kBlockV;
  const int keys = static_cast<int>(min(static_cast<int64_t>(kVScaleKeys), cu_seqlens[b + 1] - key0));
  const int64_t stride = static_cast<int64_t>(heads) * kDim;

  for (int i = tid; i < kChunks; i += kValueThreads) {
    const int key = i / (kDim / 8), c8 = i % (kDim / 8);
    const uint4 x = key < keys ? *reinterpret_cast<const uint4*>(v + (key0 + key) * stride + h * kDim + 8 * c8)
                               : make_uint4(0, 0, 0, 0);
    *reinterpret_cast<uint4*>(&tile[key][8 * c8]) = x;
  }
  __syncthreads();
  // Padding keys are zero and leave the maximum as it is; fmaxf drops a NaN, as std::max does.
  for (int c = tid; c < kDim; c += kValueThreads) {
    float absmax = 0.0f;
    for (int key = 0; key < keys; ++key) absmax = fmaxf(absmax, fabsf(__half2float(tile[key][c])));
    const float scale = __fdiv_rn(absmax, kFp8E4m3Max);
    channel_scale[c] = scale;
    for (int i = 0; i < blocks; ++i) scales[((block + i) * heads + h) * kDim + c] = scale;
  }
  __syncthreads();
  // Word w of channel c's row holds columns 4w .. 4w + 3, each the key fp8_value_key names in
  // its 32-key chunk. Four threads write a block's 64 bytes of a channel, 16 each.
  uint8_t* pair_codes = codes + block * kBlockV;
  for (int i = tid; i < kDim * 4 * blocks; i += kValueThreads) {
    const int c = i / (4 * blocks), quarter = i % (4 * blocks);
    const float scale = channel_scale[c];
    uint32_t words[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int w = 4 * quarter + k;
      words[k] = 0;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int column = 4 * w + e, key = 32 * (column / 32) + fp8_value_key(column % 32);
        const uint32_t code = key < keys ? fp8_value_code(__half2float(tile[key][c]), scale) : 0u;
        words[k] |= code << (8 * e);
      }
    }
    *reinterpret_cast<uint4*>(pair_codes + (static_cast<int64_t>(h) * kDim + c) * columns + 16 * quarter) =
        make_uint4(words[0], words[1], words[2], words[3]);
  }
}

}  // namespace

void quantize_values_fp8(const PrefillParams& p, void* stream) {
  const std::string context = "quantize_values_fp8(d=" + std::to_string(p.d) + " hk=" + std::to_string(p.hk) +
                              " batch=" + std::to_string(p.batch) + " total_k=" + std::to_string(p.total_k) +
                              " v_blocks=" + std::to_string(p.k_blocks) + ")";
  if (!prefill_supports_head_dim(p.d)) {
    throw std::invalid_argument(context + ": unsupported head dimension d=" + std::to_string(p.d) +
                                " (supported: 64, 128)");
  }
  if (p.hk <= 0 || p.hk > 65535 || p.batch < 0 || p.k_blocks < 0 || p.k_blocks > 0x7fffffff) {
    throw std::invalid_argument(context + ": heads, batch or block counts out of range");
  }
  if (p.batch == 0 || p.k_blocks == 0) return;
  if (!p.v || !p.v8 || !p.v_scale || !p.k_block_offset || !p.cu_seqlens_k) {
    throw std::invalid_argument(context + ": v, v8, v_scale, k_block_offset and cu_seqlens_k must be device pointers");
  }
  if (reinterpret_cast<uintptr_t>(p.v) % 16 != 0 || reinterpret_cast<uintptr_t>(p.v8) % 16 != 0) {
    throw std::invalid_argument(context + ": v and v8 must be 16-byte aligned (16-byte loads and stores)");
  }
  const auto s = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(p.k_blocks), static_cast<unsigned>(p.hk));
  const int64_t columns = p.k_blocks * kBlockV;
  const auto* v = static_cast<const __half*>(p.v);
  if (p.d == 64) {
    quantize_values_kernel<64>
        <<<grid, kValueThreads, 0, s>>>(v, p.v8, p.v_scale, p.cu_seqlens_k, p.k_block_offset, p.batch, p.hk, columns);
  } else {
    quantize_values_kernel<128>
        <<<grid, kValueThreads, 0, s>>>(v, p.v8, p.v_scale, p.cu_seqlens_k, p.k_block_offset, p.batch, p.hk, columns);
  }
  TILEMIX_LAUNCH_CHECK("quantize_values_kernel", context);
}

}  // namespace tilemix::gpu
