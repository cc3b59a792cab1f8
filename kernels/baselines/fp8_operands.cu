#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/baselines/fp8_operands.hpp"
#include "kernels/common/check.cuh"

namespace tilemix::gpu {
namespace {

constexpr int kThreads = 256;
constexpr float kE4m3Max = 448.0f;
constexpr float kScaleP = 256.0f;  // P <= 1 maps into [0, 256], clear of E4M3's 448 limit
constexpr int kMaxScaleExponent = 64;

int blocks_for(int64_t n, int per_thread) {
  const int64_t work = (n + per_thread - 1) / per_thread;
  return static_cast<int>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, 65535));
}

// Largest power of two p with amax * p <= 448 (1 for amax 0; capped at 2^64).
__device__ float fit_scale(float amax) {
  if (!(amax > 0.0f) || !isfinite(amax)) return 1.0f;
  const float room = kE4m3Max / amax;
  if (!isfinite(room)) return ldexpf(1.0f, kMaxScaleExponent);
  int e = 0;
  frexpf(room, &e);  // room = m * 2^e with m in [0.5, 1)
  return ldexpf(1.0f, min(e - 1, kMaxScaleExponent));
}

// Inputs keep scale 1 unless they do not fit E4M3.
__device__ float input_scale(float amax) { return amax > kE4m3Max ? fit_scale(amax) : 1.0f; }

// amax of |x| over n FP16 elements; non-negative floats order like their bit patterns.
__global__ void __launch_bounds__(kThreads) amax_kernel(const __half* __restrict__ x, int64_t n, float* amax) {
  __shared__ float warp_max[kThreads / 32];
  float m = 0.0f;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    m = fmaxf(m, fabsf(__half2float(x[i])));
  }
  for (int offset = 16; offset > 0; offset >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, warp_max[w]);
    atomicMax(reinterpret_cast<unsigned*>(amax), __float_as_uint(m));
  }
}

__global__ void input_scales_kernel(float* scalars) {
  auto slot = [&](Fp8Slot s) -> float& { return scalars[static_cast<int>(s) * kFp8SlotFloats]; };
  const Fp8Slot amax[3] = {Fp8Slot::amax_q, Fp8Slot::amax_k, Fp8Slot::amax_v};
  const Fp8Slot scale[3] = {Fp8Slot::scale_q, Fp8Slot::scale_k, Fp8Slot::scale_v};
  const Fp8Slot descale[3] = {Fp8Slot::descale_q, Fp8Slot::descale_k, Fp8Slot::descale_v};
  for (int t = 0; t < 3; ++t) {
    const float s = input_scale(slot(amax[t]));
    slot(scale[t]) = s;
    slot(descale[t]) = 1.0f / s;
  }
  slot(Fp8Slot::scale_s) = kScaleP;
  slot(Fp8Slot::descale_s) = 1.0f / kScaleP;
  const float so = fit_scale(slot(Fp8Slot::amax_v));  // |O| <= max |V|: no overflow on the first run
  slot(Fp8Slot::scale_o) = so;
  slot(Fp8Slot::descale_o) = 1.0f / so;
}

__global__ void calibrate_output_kernel(float* scalars) {
  auto slot = [&](Fp8Slot s) -> float& { return scalars[static_cast<int>(s) * kFp8SlotFloats]; };
  const float so = fit_scale(slot(Fp8Slot::amax_o));
  slot(Fp8Slot::scale_o) = so;
  slot(Fp8Slot::descale_o) = 1.0f / so;
}

__global__ void __launch_bounds__(kThreads)
    quantize_kernel(const __half* __restrict__ x, int64_t n, const float* __restrict__ scale, uint8_t* __restrict__ x8) {
  const float s = *scale;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    x8[i] = __nv_cvt_float_to_fp8(__half2float(x[i]) * s, __NV_SATFINITE, __NV_E4M3);
  }
}

__device__ __forceinline__ __half e4m3_to_half(uint8_t v, float descale) {
  const __half h = __nv_cvt_fp8_to_halfraw(v, __NV_E4M3);
  return __float2half_rn(__half2float(h) * descale);
}

// 8 elements per step: one 8-byte load, one 16-byte store. Needs n % 8 == 0 and aligned pointers.
__global__ void __launch_bounds__(kThreads)
    dequantize8_kernel(const uint2* __restrict__ o8, int64_t n8, const float* __restrict__ descale, uint4* __restrict__ o) {
  const float ds = *descale;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n8;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const uint2 in = o8[i];
    const uint8_t* b = reinterpret_cast<const uint8_t*>(&in);
    uint4 out;
    __half* h = reinterpret_cast<__half*>(&out);
#pragma unroll
    for (int e = 0; e < 8; ++e) h[e] = e4m3_to_half(b[e], ds);
    o[i] = out;
  }
}

__global__ void __launch_bounds__(kThreads)
    dequantize_kernel(const uint8_t* __restrict__ o8, int64_t n, const float* __restrict__ descale, __half* __restrict__ o) {
  const float ds = *descale;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    o[i] = e4m3_to_half(o8[i], ds);
  }
}

}  // namespace

void fp8_measure_inputs(void* scalars, const void* q, int64_t nq, const void* k, const void* v, int64_t nkv,
                        cudaStream_t stream) {
  TILEMIX_CUDA_CHECK(cudaMemsetAsync(scalars, 0, kFp8ScalarBytes, stream), "cudnn_fp8 scales");
  const struct {
    const void* x;
    int64_t n;
    Fp8Slot slot;
  } inputs[3] = {{q, nq, Fp8Slot::amax_q}, {k, nkv, Fp8Slot::amax_k}, {v, nkv, Fp8Slot::amax_v}};
  for (const auto& in : inputs) {
    if (in.n == 0) continue;
    amax_kernel<<<blocks_for(in.n, 1), kThreads, 0, stream>>>(static_cast<const __half*>(in.x), in.n,
                                                               fp8_slot(scalars, in.slot));
    TILEMIX_LAUNCH_CHECK("amax_kernel", "cudnn_fp8 input amax");
  }
  input_scales_kernel<<<1, 1, 0, stream>>>(static_cast<float*>(scalars));
  TILEMIX_LAUNCH_CHECK("input_scales_kernel", "cudnn_fp8 scales");
}

void fp8_quantize(const void* x, int64_t n, const float* scale, uint8_t* x8, cudaStream_t stream) {
  if (n == 0) return;
  quantize_kernel<<<blocks_for(n, 1), kThreads, 0, stream>>>(static_cast<const __half*>(x), n, scale, x8);
  TILEMIX_LAUNCH_CHECK("quantize_kernel", "cudnn_fp8 E4M3 operands");
}

void fp8_calibrate_output(void* scalars, cudaStream_t stream) {
  calibrate_output_kernel<<<1, 1, 0, stream>>>(static_cast<float*>(scalars));
  TILEMIX_LAUNCH_CHECK("calibrate_output_kernel", "cudnn_fp8 output scale");
}

void fp8_dequantize(const uint8_t* o8, int64_t n, const float* descale, void* o, cudaStream_t stream) {
  if (n == 0) return;
  const bool aligned = n % 8 == 0 && reinterpret_cast<uintptr_t>(o8) % 8 == 0 && reinterpret_cast<uintptr_t>(o) % 16 == 0;
  if (aligned) {
    dequantize8_kernel<<<blocks_for(n, 8), kThreads, 0, stream>>>(reinterpret_cast<const uint2*>(o8), n / 8, descale,
                                                                   static_cast<uint4*>(o));
  } else {
    dequantize_kernel<<<blocks_for(n, 1), kThreads, 0, stream>>>(o8, n, descale, static_cast<__half*>(o));
  }
  TILEMIX_LAUNCH_CHECK("dequantize_kernel", "cudnn_fp8 output");
}

}  // namespace tilemix::gpu
