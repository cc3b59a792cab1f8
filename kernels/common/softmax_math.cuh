#pragma once
// The online softmax's arithmetic shared by the prefill and decode kernels: the SFU exp2, FP16
// rounding of the state, and row reductions over registers and over the quad of lanes that holds
// a row of an MMA fragment.
#include <cuda_fp16.h>

namespace tilemix::gpu {

// 2^x with the SFU (ex2.approx: relative error about 2^-22; subnormal results flush to 0). The
// emulator uses libm exp2; both feed fp16(p), which hides the difference almost always.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float round_to_half(float x) { return __half2float(__float2half_rn(x)); }

// op over v[0 .. N-1] as a tree of depth log2(N) (N a power of two); v is overwritten. One level
// per instantiation: a loop over the levels was left rolled at N = 16, which put v in local memory.
template <int N, class Op>
__device__ __forceinline__ float tree_reduce(float (&v)[N], Op op) {
  static_assert((N & (N - 1)) == 0, "a power of two");
  if constexpr (N == 1) {
    return v[0];
  } else {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) v[i] = op(v[i], v[i + N / 2]);
    return tree_reduce(reinterpret_cast<float(&)[N / 2]>(v), op);
  }
}

// op of each v[i] over the 4 lanes of a quad (the lanes that hold one row of an MMA fragment),
// all entries interleaved.
template <int N, class Op>
__device__ __forceinline__ void quad_reduce(float (&v)[N], Op op) {
#pragma unroll
  for (int lanes = 1; lanes <= 2; lanes *= 2) {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = op(v[i], __shfl_xor_sync(0xffffffffu, v[i], lanes));
  }
}

}  // namespace tilemix::gpu
