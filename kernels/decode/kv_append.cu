// Appending new FP16 tokens to a KV cache: one CTA per (sequence, KV head, touched block) and K or
// V. The INT8 cache does exactly what append_tokens (core/decode/kv_cache.hpp) does, bit for bit:
// the block's held tokens dequantized (float(code) * old scale, fp32), the new tokens as
// float(FP16), one new scale from the absmax of all of them, every token of the block coded again.
// The FP16 cache copies the new tokens.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "core/decode/kv_cache.hpp"
#include "kernels/common/check.cuh"
#include "kernels/common/sequence_lookup.cuh"
#include "kernels/decode/params.cuh"
#include "kernels/quant/int8_codes.cuh"
#include "tilemix/decode.hpp"

namespace tilemix::gpu {
namespace {

constexpr int kAppendThreads = 128;

struct AppendKernelParams {
  const __half* k_new;
  const __half* v_new;
  const int64_t* cu_new;
  const int64_t* old_length;
  const int64_t* touched_offset;
  const int64_t* cu_capacity;
  const int64_t* cu_blocks;
  int8_t* k8;
  int8_t* v8;
  float* k_scale;
  float* v_scale;
  __half* k;
  __half* v;
  int batch, hk;
};

// Codes of 8 fp32 values (held tokens, dequantized) under `scale`, packed in element order.
__device__ __forceinline__ uint2 encode8_exact(const float (&x)[8], float scale) {
  uint32_t w[2] = {0u, 0u};
#pragma unroll
  for (int i = 0; i < 8; ++i) w[i / 4] |= (static_cast<uint32_t>(int8_code(x[i], scale)) & 0xffu) << (8 * (i % 4));
  return make_uint2(w[0], w[1]);
}

// Dequantized values of 8 codes: float(code) * scale, rounded once as on the CPU.
__device__ __forceinline__ void dequantize8(uint2 codes, float scale, float (&x)[8]) {
  const uint32_t w[2] = {codes.x, codes.y};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int code = static_cast<int8_t>((w[i / 4] >> (8 * (i % 4))) & 0xffu);
    x[i] = __fmul_rn(__int2float_rn(code), scale);
  }
}

template <int kDim, bool kInt8>
__global__ void __launch_bounds__(kAppendThreads) kv_append_kernel(const __grid_constant__ AppendKernelParams p) {
  constexpr int kChunks = kDim / 8;  // 16-byte chunks of 8 halves (8 codes) per token
  constexpr int kPerThread = kCacheBlock * kChunks / kAppendThreads;
  __shared__ float scratch[kAppendThreads / 32];
  const int64_t touched = blockIdx.x;
  const int kv_head = blockIdx.y;
  const bool is_v = blockIdx.z == 1;
  const int tid = threadIdx.x;
  const int b = find_sequence(p.touched_offset, p.batch, touched);
  const int64_t old = p.old_length[b], count = p.cu_new[b + 1] - p.cu_new[b];
  const int64_t block = old / kCacheBlock + (touched - p.touched_offset[b]);
  const int64_t first = block * kCacheBlock;
  const int held = static_cast<int>(max(int64_t{0}, old - first));  // tokens the block held before
  const int tokens = static_cast<int>(min(old + count, first + kCacheBlock) - first);
  const int64_t row_stride = static_cast<int64_t>(p.hk) * kDim;
  const int64_t cache_first = ((p.cu_capacity[b] + first) * p.hk + kv_head) * kDim;
  // New token t of the block (t >= held) is packed row cu_new[b] + first + t - old.
  const int64_t src_first = ((p.cu_new[b] + first + held - old) * p.hk + kv_head) * kDim;
  const __half* src = is_v ? p.v_new : p.k_new;

  if constexpr (!kInt8) {
    __half* dst = is_v ? p.v : p.k;
    for (int idx = tid; idx < (tokens - held) * kChunks; idx += kAppendThreads) {
      const int t = idx / kChunks, c = (idx % kChunks) * 8;
      *reinterpret_cast<uint4*>(dst + cache_first + (held + t) * row_stride + c) =
          *reinterpret_cast<const uint4*>(src + src_first + t * row_stride + c);
    }
  } else {
    int8_t* codes = is_v ? p.v8 : p.k8;
    float* scale_slot = (is_v ? p.v_scale : p.k_scale) + (p.cu_blocks[b] + block) * p.hk + kv_head;
    const float old_scale = held > 0 ? *scale_slot : 0.0f;
    // Each thread reads its chunks (codes of held tokens, halves of new ones) and, after the
    // block's new scale is known, writes the same chunks: no other thread touches them.
    uint4 raw[kPerThread];
    float absmax = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int idx = tid + i * kAppendThreads;
      const int t = idx / kChunks, c = (idx % kChunks) * 8;
      raw[i] = make_uint4(0, 0, 0, 0);
      if (t < held) {
        const uint2 w = *reinterpret_cast<const uint2*>(codes + cache_first + t * row_stride + c);
        raw[i].x = w.x;
        raw[i].y = w.y;
        float x[8];
        dequantize8(w, old_scale, x);
#pragma unroll
        for (int e = 0; e < 8; ++e) absmax = fmaxf(absmax, fabsf(x[e]));
      } else if (t < tokens) {
        raw[i] = *reinterpret_cast<const uint4*>(src + src_first + (t - held) * row_stride + c);
        absmax = absmax8(raw[i], absmax);
      }
    }
    const float scale = int8_block_scale(block_absmax<kAppendThreads / 32>(absmax, scratch));
    const Int8Encoder encoder(scale);
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int idx = tid + i * kAppendThreads;
      const int t = idx / kChunks, c = (idx % kChunks) * 8;
      if (t >= tokens) continue;
      uint2 out;
      if (t < held) {
        float x[8];
        dequantize8(make_uint2(raw[i].x, raw[i].y), old_scale, x);
        out = encode8_exact(x, scale);
      } else {
        out = encoder.encode8(raw[i]);
      }
      *reinterpret_cast<uint2*>(codes + cache_first + t * row_stride + c) = out;
    }
    if (tid == 0) *scale_slot = scale;
  }
}

template <bool kInt8>
void launch_append(const AppendKernelParams& k, const KvAppendParams& p, const std::string& context,
                   cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.total_touched), static_cast<unsigned>(p.cache.hk), 2);
  if (p.cache.d == 64) {
    kv_append_kernel<64, kInt8><<<grid, kAppendThreads, 0, stream>>>(k);
  } else {
    kv_append_kernel<128, kInt8><<<grid, kAppendThreads, 0, stream>>>(k);
  }
  TILEMIX_LAUNCH_CHECK("kv_append_kernel", context + " grid=(" + std::to_string(grid.x) + "," +
                                               std::to_string(grid.y) + ",2)");
}

}  // namespace

void kv_append(const KvAppendParams& p, void* stream) {
  const DeviceKvCache& c = p.cache;
  const bool int8 = c.is_int8();
  const std::string context = std::string("kv_append(") + (int8 ? "int8" : "fp16") + " cache, d=" +
                              std::to_string(c.d) + " hk=" + std::to_string(c.hk) + " batch=" +
                              std::to_string(c.batch) + " touched_blocks=" + std::to_string(p.total_touched) + ")";
  const auto require = [&](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(context + ": " + what);
  };
  require(c.d == 64 || c.d == 128, "unsupported head dimension d=" + std::to_string(c.d) + " (supported: 64, 128)");
  require(c.hk >= 1 && c.hk <= 65535, "unsupported hk=" + std::to_string(c.hk) + " (1..65535)");
  require(c.batch >= 0 && p.total_touched >= 0 && p.total_touched <= 0x7fffffff,
          "batch and touched blocks must be in range");
  if (c.batch == 0 || p.total_touched == 0) return;
  require(p.k_new && p.v_new && p.cu_new && p.old_length && p.touched_offset && c.cu_capacity && c.cu_blocks,
          "k_new, v_new, cu_new, old_length, touched_offset, cu_capacity and cu_blocks must be device pointers");
  require(int8 ? (c.v8 && c.k_scale && c.v_scale) : (c.k && c.v),
          "the cache needs k8, v8, k_scale, v_scale (INT8) or k, v (FP16)");

  AppendKernelParams k{};
  k.k_new = static_cast<const __half*>(p.k_new);
  k.v_new = static_cast<const __half*>(p.v_new);
  k.cu_new = p.cu_new;
  k.old_length = p.old_length;
  k.touched_offset = p.touched_offset;
  k.cu_capacity = c.cu_capacity;
  k.cu_blocks = c.cu_blocks;
  k.k8 = c.k8;
  k.v8 = c.v8;
  k.k_scale = c.k_scale;
  k.v_scale = c.v_scale;
  k.k = static_cast<__half*>(c.k);
  k.v = static_cast<__half*>(c.v);
  k.batch = c.batch;
  k.hk = c.hk;
  const auto s = static_cast<cudaStream_t>(stream);
  int8 ? launch_append<true>(k, p, context, s) : launch_append<false>(k, p, context, s);
}

}  // namespace tilemix::gpu
