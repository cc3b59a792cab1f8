// Combine of the split partial states (reference/decode_emulator.hpp), one warp per (new token,
// query head) of a sequence with more than one split, splits in ascending order:
//   M = max m_s (-inf splits skipped); w_s = exp2(m_s - M); L = sum w_s l_s;
//   o = fp16(sum w_s O_s / L); lse = (M + log2 L) * ln 2.
// Single-split sequences were written by the decode kernel itself (w = 1 makes that identical).
// Launched as a programmatic dependent of the decode kernel: its CTAs start once every decode CTA
// has started. When several sequences span more than one wave of decode CTAs a warp waits only for
// its own sequence's decode CTAs (their arrival count): the grid runs the sequences in order, so
// the rows of all but the last sequences are combined while the decode kernel's last wave still
// runs (before decode v13 the combine began after the decode kernel's end: 44 us at 16k x 64 x 16
// new tokens). Within one wave, or with one sequence, every row waits for the end of the grid
// anyway, and the on-chip wait for it (griddepcontrol) measured up to 3% faster there than the
// counts (docs/perf/decode.md, decode v13).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <type_traits>

#include "core/decode/decode_shape.hpp"
#include "kernels/common/check.cuh"
#include "kernels/common/dependent_launch.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/softmax_math.cuh"
#include "kernels/decode/cta_work.cuh"
#include "kernels/decode/epilogue.cuh"
#include "kernels/decode/launch.hpp"
#include "kernels/decode/params.cuh"

namespace tilemix::gpu {
namespace {

constexpr int kCombineWarps = 4;

// Splits whose loads a lane keeps in flight at once: a warp walks 32 splits in 4 rounds of memory
// latency instead of 32 (one round per split cost 20 us at batch 1 x 128k tokens, 32 splits).
constexpr int kCombineUnroll = 8;

// Occupancy against registers. Left alone, ptxas gives the d = 128 instance 128 registers, which
// holds a multiprocessor to 4 CTAs (16 warps): at 16k x 64 x 16 new tokens (32,768 rows) the
// combine ran 44 us after the decode kernel's end with 3.6 warps per scheduler active. Bounded to
// six CTAs it fits 80 registers without spills and was 1.6-2.2% faster per call there, but 2-5%
// slower at batch 1 x 128k (32-512 rows over 49 splits; docs/perf/decode.md, decode v11). So calls
// with more rows than the unbounded instance holds at once (4 CTAs of kCombineWarps rows per SM)
// take the bounded one.
constexpr int kCombineBoundedCtasPerSm = 6;
constexpr int kCombineUnboundedCtasPerSm = 4;
// Calls with more rows than the 6-CTA instance holds at once (16 new tokens x 32 heads x batch 8
// is 4,096 rows against 3,168 on an H200) take an 8-CTA instance: 64 registers, so that those rows
// fit one wave; it takes a row's splits in one round of loads when there are at most
// kCombineOneRoundSplits (M from the loaded maxima), else the two rounds of the others.
constexpr int kCombineDenseCtasPerSm = 8;
constexpr int kCombineOneRoundSplits = 6;

// Waits until sequence b's `expected` decode CTAs have signalled their partial states
// (signal_partials_written), with acquire semantics at GPU scope for the loads that follow; every
// lane polls the same word, so the loop is uniform. The pause between polls doubles from 64 ns to
// 1 us: combine CTAs sit beside the decode kernel's last CTAs, and with short pauses or none and
// the counts in one line (decode v13's first two builds) the FP16 cache's calls were 1-6% slower.
// All decode CTAs are resident or done when a dependent CTA runs, so the wait ends; a broken count
// traps after a minute or more instead of hanging.
__device__ __forceinline__ void wait_for_partials(const unsigned* arrivals, int b, unsigned expected) {
  const unsigned* count = arrivals + b * kDecodeArrivalStride;
  unsigned pause_ns = 64;
  for (unsigned polls = 0;; ++polls) {
    unsigned seen;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(seen) : "l"(count) : "memory");
    if (seen >= expected) return;
    if (polls > (1u << 26)) __trap();
    __nanosleep(pause_ns);
    pause_ns = min(2 * pause_ns, 1024u);
  }
}

// The warp has passed wait_for_partials for b: the last of the sequence's `rows` warps sets both
// of b's counts back to zero for the next call (no warp of b polls any more by then; the next
// call's decode kernel starts after this grid has ended).
__device__ __forceinline__ void release_sequence(unsigned* arrivals, int batch, int b, int64_t rows, int lane) {
  if (lane != 0) return;
  unsigned* count = arrivals + b * kDecodeArrivalStride;
  unsigned* seen_by = arrivals + (batch + b) * kDecodeArrivalStride;
  if (atomicAdd(seen_by, 1u) + 1u == static_cast<unsigned>(rows)) {
    *count = 0u;
    *seen_by = 0u;
  }
}

template <int kDim, int kMinCtasPerSm>
__global__ void __launch_bounds__(32 * kCombineWarps, kMinCtasPerSm)
    decode_combine_kernel(const __grid_constant__ DecodeKernelParams p) {
  constexpr int kPerLane = kDim / 32;  // channels of a lane: one 16- or 8-byte load per split
  using Chunk = std::conditional_t<kPerLane == 4, float4, float2>;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kCombineWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= p.total_new * p.hq) return;
  // The row's sequence and splits come from the call's inputs, not from the decode kernel: found
  // while its last CTAs still run.
  const int64_t token = row / p.hq;
  const int h = static_cast<int>(row % p.hq);
  const int b = find_sequence_warp(p.cu_new, p.batch, token, lane);
  const int64_t first = p.split_offset[b], last = p.split_offset[b + 1];
  const int64_t i = token - p.cu_new[b];
  const auto ws_row = [&](int64_t s) { return (s * p.hq + h) * kMaxDecodeTokens + i; };
  if (last - first == 1) return;  // the decode kernel wrote the output
  if (p.per_sequence_combine) {
    wait_for_partials(p.arrivals, b, static_cast<unsigned>((last - first) * p.hk * p.head_chunks));
    release_sequence(p.arrivals, p.batch, b, (p.cu_new[b + 1] - p.cu_new[b]) * p.hq, lane);
  } else {
    wait_for_prerequisite_grid();
  }

  float acc[kPerLane];
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) acc[c] = 0.0f;
  float l = 0.0f;
  float m = -INFINITY;
  const auto load_split = [&](int64_t s, float2& ml, Chunk& x) {
    ml = p.ws_ml[ws_row(s)];
    x = *reinterpret_cast<const Chunk*>(p.ws_o + ws_row(s) * kDim + lane * kPerLane);
  };
  // Adds a split's state with weight exp2(m_s - M); a split that saw no key adds nothing.
  const auto add_split = [&](const float2& ml, const Chunk& x) {
    if (ml.x == -INFINITY) return;
    const float w = exp2_approx(__fsub_rn(ml.x, m));
    l = __fadd_rn(l, __fmul_rn(w, ml.y));
    const float* v = reinterpret_cast<const float*>(&x);
#pragma unroll
    for (int c = 0; c < kPerLane; ++c) acc[c] = __fadd_rn(acc[c], __fmul_rn(w, v[c]));
  };
  if (kMinCtasPerSm == kCombineDenseCtasPerSm && last - first <= kCombineOneRoundSplits) {
    // One round: M from the loaded maxima.
    float2 ml[kCombineOneRoundSplits];
    Chunk x[kCombineOneRoundSplits];
#pragma unroll
    for (int u = 0; u < kCombineOneRoundSplits; ++u) {
      if (first + u < last) {
        load_split(first + u, ml[u], x[u]);
        m = fmaxf(m, ml[u].x);
      }
    }
    if (m != -INFINITY) {
#pragma unroll
      for (int u = 0; u < kCombineOneRoundSplits; ++u) {
        if (first + u < last) add_split(ml[u], x[u]);
      }
    }
  } else {
    // M over the splits, 32 of them per round of memory latency (a maximum is exact in any order).
    for (int64_t s0 = first; s0 < last; s0 += 32) {
      if (s0 + lane < last) m = fmaxf(m, p.ws_ml[ws_row(s0 + lane)].x);
    }
#pragma unroll
    for (int lanes = 16; lanes >= 1; lanes /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, lanes));
    if (m != -INFINITY) {
      // The dense instance's 64 registers hold the loads of 4 splits without spilling.
      constexpr int kUnroll = kMinCtasPerSm == kCombineDenseCtasPerSm ? 4 : kCombineUnroll;
      for (int64_t s0 = first; s0 < last; s0 += kUnroll) {
        float2 ml[kUnroll];
        Chunk x[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          if (s0 + u < last) load_split(s0 + u, ml[u], x[u]);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          if (s0 + u < last) add_split(ml[u], x[u]);
        }
      }
    }
  }
  // No legal key (unreachable in decode, where every row sees key 0): o = 0, lse = -inf.
  __half* out = p.o + (token * p.hq + h) * kDim + lane * kPerLane;
  uint32_t packed[kPerLane / 2];
#pragma unroll
  for (int c = 0; c < kPerLane / 2; ++c) {
    packed[c] = l == 0.0f ? 0u : pack_half2(__fdiv_rn(acc[2 * c], l), __fdiv_rn(acc[2 * c + 1], l));
  }
  if constexpr (kPerLane == 4) {
    *reinterpret_cast<uint2*>(out) = make_uint2(packed[0], packed[1]);
  } else {
    *reinterpret_cast<uint32_t*>(out) = packed[0];
  }
  if (lane == 0 && p.lse != nullptr) {
    p.lse[static_cast<int64_t>(h) * p.total_new + token] = decode_lse(m, l);
  }
}

}  // namespace

void launch_decode_combine(const DecodeKernelParams& p, int d, int sm_count, void* stream, const std::string& context) {
  const int64_t rows = p.total_new * p.hq;
  const dim3 grid(static_cast<unsigned>((rows + kCombineWarps - 1) / kCombineWarps));
  const auto s = static_cast<cudaStream_t>(stream);
  const std::string what = "decode_combine_kernel " + context + " grid=" + std::to_string(grid.x);
  // 0 CTAs per SM: no bound, ptxas's own register count.
  const bool bounded = rows >= static_cast<int64_t>(sm_count) * kCombineUnboundedCtasPerSm * kCombineWarps;
  const bool dense = rows > static_cast<int64_t>(sm_count) * kCombineBoundedCtasPerSm * kCombineWarps;
  const auto kernel = d == 64 ? (dense     ? decode_combine_kernel<64, kCombineDenseCtasPerSm>
                                 : bounded ? decode_combine_kernel<64, kCombineBoundedCtasPerSm>
                                           : decode_combine_kernel<64, 0>)
                              : (dense     ? decode_combine_kernel<128, kCombineDenseCtasPerSm>
                                 : bounded ? decode_combine_kernel<128, kCombineBoundedCtasPerSm>
                                           : decode_combine_kernel<128, 0>);
  launch_dependent(kernel, grid, dim3(32 * kCombineWarps), 0, s, what, p);
  TILEMIX_LAUNCH_CHECK("decode_combine_kernel", context + " grid=" + std::to_string(grid.x));
}

}  // namespace tilemix::gpu
