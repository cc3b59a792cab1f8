#pragma once
// The end of a decode CTA: o = fp16(O / l) and the LSE for a sequence with one split, or the
// split's partial state (m, l, unnormalized O) for the combine kernel, then the arrival the
// combine waits for. One function per mainloop, for the layout its O fragments have.
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "core/decode/decode_shape.hpp"
#include "kernels/common/mma.cuh"
#include "kernels/decode/cta_work.cuh"
#include "kernels/decode/params.cuh"

namespace tilemix::gpu {

// The log-sum-exp of a finished row from its running maximum m (log2 domain) and sum l; -inf for
// a row without a legal key (unreachable in decode, where every row sees key 0).
__device__ __forceinline__ float decode_lse(float m, float l) {
  constexpr float kLn2 = 0.69314718055994530942f;
  return l == 0.0f ? -INFINITY : __fmul_rn(__fadd_rn(m, log2f(l)), kLn2);
}

// Output channels c .. c + 3 of (token, query head h): fp16(acc / l), 0 where l is; with channel 0
// the row's LSE.
template <int D>
__device__ __forceinline__ void store_decode_output(const DecodeKernelParams& p, int64_t token, int h, int c,
                                                    float4 acc, float m, float l) {
  uint2 out = make_uint2(0u, 0u);
  if (l != 0.0f) {
    out.x = pack_half2(__fdiv_rn(acc.x, l), __fdiv_rn(acc.y, l));
    out.y = pack_half2(__fdiv_rn(acc.z, l), __fdiv_rn(acc.w, l));
  }
  *reinterpret_cast<uint2*>(p.o + (token * p.hq + h) * D + c) = out;
  if (c == 0 && p.lse != nullptr) p.lse[static_cast<int64_t>(h) * p.total_new + token] = decode_lse(m, l);
}

// Row of (split, query head h, token) in the partial-state workspace.
__device__ __forceinline__ int64_t partial_state_row(const DecodeKernelParams& p, const DecodeBlock& blk,
                                                     int64_t token, int h) {
  return ((p.split_offset[blk.b] + blk.split) * p.hq + h) * kMaxDecodeTokens + (token - p.cu_new[blk.b]);
}

// A decode CTA of a multi-split sequence, after every thread's workspace writes: one arrival for
// sequence b. The barrier orders every thread's writes before thread 0's add, whose release at
// GPU scope is cumulative: a combine warp that acquires the count sees them all.
__device__ __forceinline__ void signal_partials_written(const DecodeKernelParams& p, int b, int tid) {
  if (!p.per_sequence_combine) return;
  __syncthreads();
  if (tid == 0) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(p.arrivals + b * kDecodeArrivalStride) : "memory");
  }
}

// Output channel of the mma.sync kernel's O^T fragment element (channel slice ds, row half
// `upper`) of lane group g (DecodeMath::pv says why the INT8 cache's channels interleave).
template <class Cfg>
__device__ __forceinline__ int o_channel(int ds, int g, int upper) {
  return Cfg::kInt8 ? 16 * ds + 2 * g + upper : 16 * ds + g + 8 * upper;
}

// The mma.sync kernel: the warps' partial O^T and l meet in shared memory (the stages are free
// now), then one thread per (row, 4 channels) stores, coalesced.
template <class Cfg, class Smem>
__device__ __forceinline__ void mma_sync_epilogue(const DecodeKernelParams& p, const DecodeBlock& blk, char* smem,
                                                  const float (&o)[Cfg::kDimSlices][Cfg::kQueryFrags][4],
                                                  const float (&row_max)[Cfg::kQueryFrags][2],
                                                  const float (&row_sum)[Cfg::kQueryFrags][2], int kw, int qw, int g,
                                                  int tq, int tid) {
  constexpr int D = Cfg::kHeadDim, QF = Cfg::kQueryFrags, DS = Cfg::kDimSlices;
  constexpr int kKeyWarps = Cfg::kKeyWarps, kRows = Cfg::kRows;
  __syncthreads();
  float* reduce = reinterpret_cast<float*>(smem);
  float* sum_smem = reinterpret_cast<float*>(smem + Smem::kRowSum);
  float* max_smem = reinterpret_cast<float*>(smem + Smem::kRowMax);
#pragma unroll
  for (int f = 0; f < QF; ++f) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float l = row_sum[f][e];
#pragma unroll
      for (int off = 4; off < 32; off <<= 1) l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, off));
      const int col = qw * Cfg::kWarpRows + f * 8 + 2 * tq + e;
      if (g == 0) {
        sum_smem[kw * kRows + col] = l;
        if (kw == 0) max_smem[col] = row_max[f][e];
      }
    }
#pragma unroll
    for (int ds = 0; ds < DS; ++ds) {
      // Columns 2t and 2t+1: rows col0 and col0 + 1 of this warp's reduction slab.
      const int col0 = qw * Cfg::kWarpRows + f * 8 + 2 * tq;
      float* row0 = reduce + (kw * kRows + col0) * Smem::kReduceRow;
      float* row1 = row0 + Smem::kReduceRow;
      if constexpr (Cfg::kInt8) {
        const int c = o_channel<Cfg>(ds, g, 0);  // channels c and c + 1
        *reinterpret_cast<float2*>(row0 + c) = make_float2(o[ds][f][0], o[ds][f][2]);
        *reinterpret_cast<float2*>(row1 + c) = make_float2(o[ds][f][1], o[ds][f][3]);
      } else {
        const int c0 = o_channel<Cfg>(ds, g, 0), c1 = o_channel<Cfg>(ds, g, 1);
        row0[c0] = o[ds][f][0];
        row1[c0] = o[ds][f][1];
        row0[c1] = o[ds][f][2];
        row1[c1] = o[ds][f][3];
      }
    }
  }
  __syncthreads();

  const bool direct = blk.splits == 1;
  for (int idx = tid; idx < blk.rows * (D / 4); idx += Cfg::kThreads) {
    const int r = idx / (D / 4), c = (idx % (D / 4)) * 4;
    float4 acc = *reinterpret_cast<const float4*>(reduce + r * Smem::kReduceRow + c);
    float l = sum_smem[r];
#pragma unroll
    for (int w = 1; w < kKeyWarps; ++w) {
      const float4 x = *reinterpret_cast<const float4*>(reduce + (w * kRows + r) * Smem::kReduceRow + c);
      acc = make_float4(__fadd_rn(acc.x, x.x), __fadd_rn(acc.y, x.y), __fadd_rn(acc.z, x.z), __fadd_rn(acc.w, x.w));
      l = __fadd_rn(l, sum_smem[w * kRows + r]);
    }
    const float m = max_smem[r];
    const int64_t token = blk.token(p, r);
    const int h = blk.head(r);
    if (direct) {
      store_decode_output<D>(p, token, h, c, acc, m, l);
    } else {
      const int64_t ws_row = partial_state_row(p, blk, token, h);
      *reinterpret_cast<float4*>(p.ws_o + ws_row * D + c) = acc;
      if (c == 0) p.ws_ml[ws_row] = make_float2(m, l);
    }
  }
  if (!direct) signal_partials_written(p, blk.b, tid);
}

// The wgmma kernel: each row's l over its quad, then the thread's channels of its two rows
// (O element 4j + e is channel 8j + 2 tq + e % 2 of row rows_of_thread[e / 2]).
__device__ __forceinline__ void wgmma_epilogue(const DecodeKernelParams& p, const DecodeBlock& blk, const float (&o)[64],
                                               const float (&row_max)[2], const float (&row_sum)[2],
                                               const int (&rows_of_thread)[2], int tq, int tid) {
  constexpr int D = kDecodeWgmmaDim;
  const bool direct = blk.splits == 1;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = row_sum[h];
    l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 1));
    l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 2));
    const int r = rows_of_thread[h];
    if (r >= blk.rows) continue;
    const int64_t token = blk.token(p, r);
    const int head = blk.head(r);
    if (direct) {
      __half* out = p.o + (token * p.hq + head) * D;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const uint32_t v =
            l == 0.0f ? 0u : pack_half2(__fdiv_rn(o[4 * j + 2 * h], l), __fdiv_rn(o[4 * j + 2 * h + 1], l));
        *reinterpret_cast<uint32_t*>(out + 8 * j + 2 * tq) = v;
      }
      if (tq == 0 && p.lse != nullptr) {
        p.lse[static_cast<int64_t>(head) * p.total_new + token] = decode_lse(row_max[h], l);
      }
    } else {
      const int64_t ws_row = partial_state_row(p, blk, token, head);
      float* out = p.ws_o + ws_row * D;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        *reinterpret_cast<float2*>(out + 8 * j + 2 * tq) = make_float2(o[4 * j + 2 * h], o[4 * j + 2 * h + 1]);
      }
      if (tq == 0) p.ws_ml[ws_row] = make_float2(row_max[h], l);
    }
  }
  if (!direct) signal_partials_written(p, blk.b, tid);
}

}  // namespace tilemix::gpu
