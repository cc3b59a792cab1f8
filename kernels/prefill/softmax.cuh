#pragma once
// Online softmax in the log2 domain, step for step as the emulator's header states: scores
// arrive already multiplied by softmax_scale * log2(e), so every exponential is one exp2.
//   m_new = max(m, rowmax(s))            [fp16 state: rounded]
//   ref   = m_new, or 0 when m_new = -inf (a row with no legal key so far)
//   p     = exp2(s - ref), alpha = exp2(m - ref)
//   l     = l * alpha + rowsum(p)        [fp16 state: rounded]
// Separate fp32 operations (__fsub_rn, __fmul_rn, __fadd_rn) keep the compiler from fusing
// them into FMAs the emulator does not perform.
#include <cuda_fp16.h>

#include <cmath>

namespace tilemix::gpu {

// 2^x with the SFU (ex2.approx: relative error about 2^-22; subnormal results flush to 0). The
// emulator uses libm exp2; both feed fp16(p), which hides the difference almost always.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float round_to_half(float x) { return __half2float(__float2half_rn(x)); }

// Sum / max over the 4 threads of a quad, which together hold one row of a fragment.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Row state of the rows a thread holds: two per m16 slice (lane/4 and lane/4 + 8). Every thread of
// a quad keeps the full-row values.
template <int kRowSlices, int kKeyFrags>
struct OnlineSoftmax {
  static constexpr int kRows = 2 * kRowSlices;
  float row_max[kRows];
  float row_sum[kRows];

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
    }
  }

  // Turns the scores of one key tile into p (fp32, in place) and returns each row's alpha.
  __device__ __forceinline__ void update(float (&s)[kRowSlices][kKeyFrags][4], bool fp16_state,
                                         float (&alpha)[kRows]) {
#pragma unroll
    for (int mi = 0; mi < kRowSlices; ++mi) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = mi * 2 + half;
        float tile_max = -INFINITY;
#pragma unroll
        for (int ni = 0; ni < kKeyFrags; ++ni) {
          tile_max = fmaxf(tile_max, fmaxf(s[mi][ni][half * 2], s[mi][ni][half * 2 + 1]));
        }
        float m_new = fmaxf(row_max[r], quad_max(tile_max));
        if (fp16_state) m_new = round_to_half(m_new);
        const float ref = m_new == -INFINITY ? 0.0f : m_new;
        alpha[r] = exp2_approx(__fsub_rn(row_max[r], ref));
        float sum = 0.0f;
#pragma unroll
        for (int ni = 0; ni < kKeyFrags; ++ni) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s[mi][ni][half * 2 + e];
            x = exp2_approx(__fsub_rn(x, ref));
            sum = __fadd_rn(sum, x);
          }
        }
        float l = __fadd_rn(__fmul_rn(row_sum[r], alpha[r]), quad_sum(sum));
        if (fp16_state) l = round_to_half(l);
        row_sum[r] = l;
        row_max[r] = m_new;
      }
    }
  }
};

}  // namespace tilemix::gpu
