// Layout `adaptive` on the GPU: the pooled queries and keys, the group scores and the selection of
// the FP16 groups, every value in the operation order of core/routing/layouts/adaptive.cpp (the
// shared steps in adaptive_math.hpp), so that the words are bit for bit the CPU's. Maxima are
// order-free; every sum runs in one thread (a pooled channel's lanes in 8, then their sum in one).
// The words are built inside every timed tilemix call: the pooling reads Q and K once, in 16-byte
// loads.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/routing/layouts/adaptive_math.hpp"
#include "core/tiling.hpp"
#include "kernels/common/check.cuh"
#include "kernels/common/sequence_lookup.cuh"
#include "tilemix/routing.hpp"

namespace tilemix::gpu {
namespace {

using layouts::adaptive_add;
using layouts::adaptive_div;
using layouts::adaptive_exp2;
using layouts::adaptive_fma;
using layouts::adaptive_mul;
using layouts::adaptive_order_key;
using layouts::adaptive_selection_key;
using layouts::kAdaptiveKeptKey;
using layouts::kAdaptivePoolLanes;
using layouts::kAdaptiveLog2e;

constexpr int kScoreThreads = kMaxGroups;  // one thread per group of a row
constexpr int kScoreBatch = 8;
constexpr int kSelectThreads = 256;
constexpr int kSelectBatch = 8;  // slots whose loads are in flight together
constexpr int kRadixBits = 8;
constexpr int kRadixBins = 1 << kRadixBits;

// Maximum over the block's threads (kThreads a multiple of 32, linear index `tid`) of NaN-free
// values.
template <int kThreads>
__device__ float block_max(float x, int tid, float* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  if (tid % 32 == 0) scratch[tid / 32] = x;
  __syncthreads();
  float m = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, scratch[w]);
  return m;
}

// The mean of channel c from its lanes' sums (lane[w][c]), added in lane order from 0.
template <int kDim>
__device__ float mean_of_lanes(const float (*lane)[kDim], int c, float count) {
  float sum = 0.0f;
#pragma unroll
  for (int w = 0; w < kAdaptivePoolLanes; ++w) sum = adaptive_add(sum, lane[w][c]);
  return adaptive_div(sum, count);
}

// Step 1 reads Q and K once in 16-byte loads: thread (v, w) of a pooling CTA holds channels
// 8 v .. 8 v + 7 of lane w, each channel's sum in the CPU's order (rows w, w + 8, ..., and inside
// a row the KV head's query heads in order). The rows' addresses are 16-byte aligned (checked in
// adaptive_words).
constexpr int kPoolVector = 8;  // channels per 16-byte load

template <int kDim>
constexpr int pool_threads() {
  return kDim / kPoolVector * kAdaptivePoolLanes;
}

// Adds the 8 halves of `raw` to sum[0..7] and their magnitudes into `magnitude`. fmaxf drops a
// NaN, as max_magnitude does.
__device__ __forceinline__ void pool_vector(const uint4& raw, float (&sum)[kPoolVector], float& magnitude) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&words[i]));
    sum[2 * i] = adaptive_add(sum[2 * i], f.x);
    sum[2 * i + 1] = adaptive_add(sum[2 * i + 1], f.y);
    magnitude = fmaxf(magnitude, fmaxf(fabsf(f.x), fabsf(f.y)));
  }
}

// Pools items 0 .. items - 1 (address_of(n) their 16-byte vectors) in order. The loads of
// kPoolBatch items are issued before their sums: one at a time, each load's latency would be
// paid in turn (the grids are small at short L).
constexpr int kPoolBatch = 8;

template <typename AddressOf>
__device__ __forceinline__ void pool_items(int64_t items, float (&sum)[kPoolVector], float& magnitude,
                                           AddressOf address_of) {
  int64_t n0 = 0;
  for (; n0 + kPoolBatch <= items; n0 += kPoolBatch) {
    uint4 raw[kPoolBatch];
#pragma unroll
    for (int u = 0; u < kPoolBatch; ++u) raw[u] = __ldg(reinterpret_cast<const uint4*>(address_of(n0 + u)));
#pragma unroll
    for (int u = 0; u < kPoolBatch; ++u) pool_vector(raw[u], sum, magnitude);
  }
  for (; n0 < items; ++n0) pool_vector(__ldg(reinterpret_cast<const uint4*>(address_of(n0))), sum, magnitude);
}

// The pooled channels of a CTA from its lanes' sums: lane w's sums into lane_sum, the magnitude
// over the CTA, then lane 0's threads write the means (of `count` values) and thread (0, 0) the
// magnitude, at task `task`.
template <int kDim>
__device__ __forceinline__ void finish_pool(const float (&sum)[kPoolVector], float magnitude, float count,
                                            int64_t task, float (*lane_sum)[kDim], float* scratch,
                                            float* __restrict__ mean, float* __restrict__ max_magnitude) {
  const int v = threadIdx.x, w = threadIdx.y;
#pragma unroll
  for (int e = 0; e < kPoolVector; ++e) lane_sum[w][kPoolVector * v + e] = sum[e];
  magnitude = block_max<pool_threads<kDim>()>(magnitude, w * (kDim / kPoolVector) + v, scratch);  // synchronizes
  if (w == 0) {
#pragma unroll
    for (int e = 0; e < kPoolVector; ++e) {
      const int c = kPoolVector * v + e;
      mean[task * kDim + c] = mean_of_lanes<kDim>(lane_sum, c, count);
    }
  }
  if (w == 0 && v == 0) max_magnitude[task] = magnitude;
}

// Step 1 in one launch: CTA x < tiles pools query tile x of a KV head (its rows, and inside a
// row the KV head's query heads), the others pool key group x - tiles; blockIdx.y is the KV head.
// The minimum of four CTAs per SM is for ptxas: without one it settles on 72 registers and spills.
template <int kDim>
__global__ void __launch_bounds__(pool_threads<kDim>(), 4)
    pool_kernel(const __half* __restrict__ q, const __half* __restrict__ k, const int64_t* __restrict__ cu_q,
                const int64_t* __restrict__ cu_k, const int64_t* __restrict__ tile_offset,
                const int* __restrict__ tile_sequence, const int64_t* __restrict__ group_offset,
                const int64_t* __restrict__ mask_width, int block_m, int batch, int hq, int hk, int64_t tiles,
                int64_t groups, float* __restrict__ qbar, float* __restrict__ qmax, float* __restrict__ kbar,
                float* __restrict__ kmax) {
  __shared__ float lane_sum[kAdaptivePoolLanes][kDim];
  __shared__ float scratch[pool_threads<kDim>() / 32];
  const int h = blockIdx.y, v = threadIdx.x, w = threadIdx.y;
  float sum[kPoolVector] = {}, magnitude = 0.0f;
  if (blockIdx.x < tiles) {
    const int64_t t = blockIdx.x;
    const int b = tile_sequence[t], heads = hq / hk;
    const int64_t row0 = cu_q[b] + (t - tile_offset[b]) * block_m;
    const int64_t rows = min(static_cast<int64_t>(block_m), cu_q[b + 1] - row0);
    // This lane's vectors in the CPU's order: item n is row w + 8 (n / heads), head n % heads.
    const int64_t items = (rows > w ? (rows - w + kAdaptivePoolLanes - 1) / kAdaptivePoolLanes : 0) * heads;
    pool_items(items, sum, magnitude, [&](int64_t n) {
      const int64_t r = w + n / heads * kAdaptivePoolLanes;
      const int64_t i = static_cast<int64_t>(h) * heads + n % heads;
      return q + ((row0 + r) * hq + i) * kDim + kPoolVector * v;
    });
    finish_pool<kDim>(sum, magnitude, static_cast<float>(rows * heads), static_cast<int64_t>(h) * tiles + t,
                      lane_sum, scratch, qbar, qmax);
  } else {
    const int64_t g = blockIdx.x - tiles;
    const int b = find_sequence(group_offset, batch, g);
    const int64_t key0 = cu_k[b] + (g - group_offset[b]) * mask_width[b];
    const int64_t keys = min(mask_width[b], cu_k[b + 1] - key0);
    const int64_t items = keys > w ? (keys - w + kAdaptivePoolLanes - 1) / kAdaptivePoolLanes : 0;
    pool_items(items, sum, magnitude, [&](int64_t n) {
      return k + ((key0 + w + n * kAdaptivePoolLanes) * hk + h) * kDim + kPoolVector * v;
    });
    finish_pool<kDim>(sum, magnitude, static_cast<float>(keys), static_cast<int64_t>(h) * groups + g, lane_sum,
                      scratch, kbar, kmax);
  }
}

// Step 2: one CTA per (query tile, KV head), thread j scores group j from the pooled keys staged
// in shared memory; the mass sum runs over the row's groups in j order in every thread.
template <int kDim>
__global__ void __launch_bounds__(kScoreThreads)
    group_scores_kernel(const float* __restrict__ qbar, const float* __restrict__ qmax,
                        const float* __restrict__ kbar, const float* __restrict__ kmax,
                        const int* __restrict__ tile_sequence, const int* __restrict__ tile_groups,
                        const float* __restrict__ cells, const int64_t* __restrict__ group_offset,
                        float softmax_scale, int64_t tiles, int64_t groups, float* __restrict__ scores) {
  __shared__ float query[kDim];
  __shared__ float key[kMaxGroups][kDim + 1];  // the tile's pooled keys, rows padded off one bank
  __shared__ float mass[kMaxGroups];
  __shared__ float scratch[kScoreThreads / 32];
  const int64_t t = blockIdx.x;
  const int h = blockIdx.y, j = threadIdx.x;
  const int64_t task = static_cast<int64_t>(h) * tiles + t;
  const int legal = tile_groups[t];
  const int64_t first_group = static_cast<int64_t>(h) * groups + group_offset[tile_sequence[t]];
  const int64_t group = first_group + j;
  for (int c = j; c < kDim; c += kScoreThreads) query[c] = qbar[task * kDim + c];
  // The legal groups' pooled keys, contiguous from first_group: 16-byte loads, kScoreBatch of
  // them in flight per thread (at short L there are few CTAs to hide a load's latency).
  const auto* keys4 = reinterpret_cast<const float4*>(kbar + first_group * kDim);
  const int vectors = legal * kDim / 4;
  for (int i0 = j; i0 < vectors; i0 += kScoreBatch * kScoreThreads) {
    float4 x[kScoreBatch];
#pragma unroll
    for (int u = 0; u < kScoreBatch; ++u) {
      if (i0 + u * kScoreThreads < vectors) x[u] = __ldg(keys4 + i0 + u * kScoreThreads);
    }
#pragma unroll
    for (int u = 0; u < kScoreBatch; ++u) {
      const int i = 4 * (i0 + u * kScoreThreads);
      if (i < legal * kDim) {
        float* row = &key[i / kDim][i % kDim];
        row[0] = x[u].x;
        row[1] = x[u].y;
        row[2] = x[u].z;
        row[3] = x[u].w;
      }
    }
  }
  __syncthreads();
  float logit = -INFINITY;
  if (j < legal) {
    float dot = 0.0f;
    for (int c = 0; c < kDim; ++c) dot = adaptive_fma(query[c], key[j][c], dot);
    logit = adaptive_mul(dot, softmax_scale);
    if (logit != logit) logit = -INFINITY;
  }
  const float row_max = block_max<kScoreThreads>(logit, j, scratch);
  if (j < legal) {
    mass[j] = adaptive_mul(cells[t * kMaxGroups + j],
                           adaptive_exp2(adaptive_mul(adaptive_add(logit, -row_max), kAdaptiveLog2e)));
  }
  __syncthreads();
  float total = 0.0f;
  for (int i = 0; i < legal; ++i) total = adaptive_add(total, mass[i]);
  float score = 0.0f;
  if (j < legal) score = adaptive_mul(adaptive_mul(adaptive_div(mass[j], total), qmax[task]), kmax[group]);
  scores[task * kMaxGroups + j] = score;
}

// Step 3: one CTA per (sequence, KV head). The N largest selection keys (distinct) are those at or
// above the N-th largest, found digit by digit from the top (radix select: integer counts, so the
// result does not depend on the order the threads count in). Once a digit's bin holds one key,
// that key is the N-th largest and one more pass finds it.
__global__ void __launch_bounds__(kSelectThreads)
    select_words_kernel(const float* __restrict__ scores, const int64_t* __restrict__ tile_offset,
                        const int* __restrict__ tile_groups, const int64_t* __restrict__ fp16_groups, int64_t tiles,
                        uint64_t* __restrict__ words) {
  static_assert(kRadixBins == 8 * 32, "warp 0 scans the bins eight per lane");
  __shared__ unsigned int histogram[kRadixBins];
  __shared__ unsigned long long legal_count;
  __shared__ unsigned long long chosen_prefix;
  __shared__ long long chosen_rank;
  __shared__ bool chosen_alone;
  const int b = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int64_t t0 = tile_offset[b], rows = tile_offset[b + 1] - t0;
  const float* row_scores = scores + (static_cast<int64_t>(h) * tiles + t0) * kMaxGroups;
  const auto key_of = [&](int64_t m, int j) {
    const uint32_t order = j == 0 ? kAdaptiveKeptKey : adaptive_order_key(row_scores[m * kMaxGroups + j]);
    return adaptive_selection_key(order, m, j);
  };
  // Calls f(key) for every legal key of the sequence that this thread holds; the loads of
  // kSelectBatch slots are issued before their keys are used.
  const auto for_each_key = [&](auto f) {
    const int64_t slots = rows * kMaxGroups;
    for (int64_t first = tid; first < slots; first += kSelectBatch * kSelectThreads) {
      float score[kSelectBatch];
      int legal[kSelectBatch];
#pragma unroll
      for (int u = 0; u < kSelectBatch; ++u) {
        const int64_t slot = first + u * kSelectThreads;
        if (slot < slots) {
          score[u] = row_scores[slot];
          legal[u] = tile_groups[t0 + slot / kMaxGroups];
        }
      }
#pragma unroll
      for (int u = 0; u < kSelectBatch; ++u) {
        const int64_t slot = first + u * kSelectThreads;
        const int j = static_cast<int>(slot % kMaxGroups);
        if (slot < slots && j < legal[u]) {
          f(adaptive_selection_key(j == 0 ? kAdaptiveKeptKey : adaptive_order_key(score[u]), slot / kMaxGroups, j));
        }
      }
    }
  };

  if (tid == 0) legal_count = 0;
  __syncthreads();
  unsigned long long mine = 0;
  for (int64_t m = tid; m < rows; m += kSelectThreads) mine += tile_groups[t0 + m];
  atomicAdd(&legal_count, mine);
  __syncthreads();
  const int64_t fp16 = min(fp16_groups[b], static_cast<int64_t>(legal_count));

  uint64_t prefix = 0, known = 0;  // the digits of the N-th largest key found so far, and their bits
  int64_t rank = fp16;             // its rank among the keys that share them
  for (int shift = 64 - kRadixBits; fp16 > 0 && shift >= 0; shift -= kRadixBits) {
    for (int i = tid; i < kRadixBins; i += kSelectThreads) histogram[i] = 0;
    __syncthreads();
    for_each_key([&](uint64_t key) {
      if ((key & known) == prefix) atomicAdd(&histogram[(key >> shift) & (kRadixBins - 1)], 1u);
    });
    __syncthreads();
    if (tid < 32) {
      // Lane l holds bins 255 - 8 l down to 248 - 8 l; the first lane whose running count from
      // the top reaches the rank holds the digit.
      const int top = kRadixBins - 1 - 8 * tid;
      unsigned int count = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) count += histogram[top - i];
      unsigned int through = count;
      for (int offset = 1; offset < 32; offset <<= 1) {
        const unsigned int below = __shfl_up_sync(0xffffffffu, through, offset);
        if (tid >= offset) through += below;
      }
      const unsigned int reached = __ballot_sync(0xffffffffu, through >= rank);
      const int lane = reached ? __ffs(reached) - 1 : 31;
      if (tid == lane) {
        int64_t above = through - count;
        int digit = top;
        for (; digit > top - 7 && above + histogram[digit] < rank; --digit) above += histogram[digit];
        chosen_rank = rank - above;
        chosen_prefix = prefix | (static_cast<uint64_t>(digit) << shift);
        chosen_alone = histogram[digit] == 1;
      }
    }
    __syncthreads();
    rank = chosen_rank;
    prefix = chosen_prefix;
    known |= static_cast<uint64_t>(kRadixBins - 1) << shift;
    if (chosen_alone) {
      __syncthreads();  // every thread has read chosen_prefix
      for_each_key([&](uint64_t key) {
        if ((key & known) == prefix) chosen_prefix = key;  // one thread: the key is unique
      });
      __syncthreads();
      prefix = chosen_prefix;
      break;
    }
  }

  // One warp per row: lane l decides groups l and l + 32.
  const int lane = tid % 32;
  for (int64_t m = tid / 32; m < rows; m += kSelectThreads / 32) {
    const int legal = tile_groups[t0 + m];
    const bool low = lane < legal && (fp16 == 0 || key_of(m, lane) < prefix);
    const bool high = lane + 32 < legal && (fp16 == 0 || key_of(m, lane + 32) < prefix);
    const uint64_t word = __ballot_sync(0xffffffffu, low) | static_cast<uint64_t>(__ballot_sync(0xffffffffu, high)) << 32;
    if (lane == 0) words[static_cast<int64_t>(h) * tiles + t0 + m] = word;
  }
}

template <int kDim>
void launch_all(const AdaptiveRoutingParams& p, cudaStream_t stream, const std::string& context) {
  const auto* q = static_cast<const __half*>(p.q);
  const auto* k = static_cast<const __half*>(p.k);
  const auto hk = static_cast<unsigned>(p.hk);
  const dim3 pool_block(kDim / kPoolVector, kAdaptivePoolLanes);
  if (p.total_tiles + p.total_groups > 0) {
    pool_kernel<kDim><<<dim3(static_cast<unsigned>(p.total_tiles + p.total_groups), hk), pool_block, 0, stream>>>(
        q, k, p.cu_seqlens_q, p.cu_seqlens_k, p.tile_offset, p.tile_sequence, p.group_offset, p.mask_width,
        p.block_m, p.batch, p.hq, p.hk, p.total_tiles, p.total_groups, p.qbar, p.qmax, p.kbar, p.kmax);
    TILEMIX_LAUNCH_CHECK("pool_kernel", context);
  }
  if (p.total_tiles > 0) {
    group_scores_kernel<kDim><<<dim3(static_cast<unsigned>(p.total_tiles), hk), kScoreThreads, 0, stream>>>(
        p.qbar, p.qmax, p.kbar, p.kmax, p.tile_sequence, p.tile_groups, p.cells, p.group_offset, p.softmax_scale,
        p.total_tiles, p.total_groups, p.scores);
    TILEMIX_LAUNCH_CHECK("group_scores_kernel", context);
  }
  select_words_kernel<<<dim3(static_cast<unsigned>(p.batch), hk), kSelectThreads, 0, stream>>>(
      p.scores, p.tile_offset, p.tile_groups, p.fp16_groups, p.total_tiles, p.words);
  TILEMIX_LAUNCH_CHECK("select_words_kernel", context);
}

}  // namespace

void adaptive_words(const AdaptiveRoutingParams& p, void* stream) {
  const std::string context = "adaptive_words(d=" + std::to_string(p.d) + " hq=" + std::to_string(p.hq) +
                              " hk=" + std::to_string(p.hk) + " batch=" + std::to_string(p.batch) +
                              " tiles=" + std::to_string(p.total_tiles) + " groups=" + std::to_string(p.total_groups) +
                              ")";
  if (p.d != 64 && p.d != 128) {
    throw std::invalid_argument(context + ": unsupported head dimension d=" + std::to_string(p.d) +
                                " (supported: 64, 128)");
  }
  if (p.hq <= 0 || p.hk <= 0 || p.hq % p.hk != 0 || p.hk > 65535 || p.batch < 0 || p.batch > 0x7fffffff ||
      p.total_tiles < 0 || p.total_groups < 0 || p.total_tiles + p.total_groups > 0x7fffffff ||
      p.block_m <= 0) {
    throw std::invalid_argument(context + ": heads, batch, tile or group counts out of range");
  }
  if (p.batch == 0 || p.total_tiles == 0) return;
  // Without keys (every Lk = 0) there are no pooled keys, and K and its scratch may be empty.
  const bool keys = p.total_groups > 0;
  if (!p.q || !p.cu_seqlens_q || !p.cu_seqlens_k || !p.tile_offset || !p.tile_sequence || !p.tile_groups ||
      !p.cells || !p.group_offset || !p.mask_width || !p.fp16_groups || !p.qbar || !p.qmax || !p.scores ||
      !p.words || (keys && (!p.k || !p.kbar || !p.kmax))) {
    throw std::invalid_argument(context + ": inputs, schedule arrays, scratch and words must be device pointers");
  }
  if (reinterpret_cast<uintptr_t>(p.q) % 16 != 0 ||
      (keys && (reinterpret_cast<uintptr_t>(p.k) % 16 != 0 || reinterpret_cast<uintptr_t>(p.kbar) % 16 != 0))) {
    throw std::invalid_argument(context +
                                ": q, k and kbar must be 16-byte aligned (the pooling and the group scores read "
                                "16-byte vectors)");
  }
  const auto s = static_cast<cudaStream_t>(stream);
  if (p.d == 64) {
    launch_all<64>(p, s, context);
  } else {
    launch_all<128>(p, s, context);
  }
}

}  // namespace tilemix::gpu
