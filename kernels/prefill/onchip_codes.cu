// gpu::code_resident_rows: one CTA lays a block out as the warp-specialized kernel's shared memory
// holds it (64-channel blocks of 128-byte rows in the 128-byte swizzle) and codes it as the
// consumers code Q8 (128 rows, quantize_resident_half by two warpgroups of 128 threads) or as
// the quantizer warps code K8 (64 rows, quantize_resident_rows by 96 threads).
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/check.cuh"
#include "kernels/prefill/onchip_quant.cuh"
#include "kernels/prefill/tile_sizes.hpp"
#include "tilemix/device_buffer.hpp"
#include "tilemix/onchip_codes.hpp"

namespace tilemix::gpu {
namespace {

// The consumers' Q8 (kGroups = 2 warpgroups, each coding its half of a kRows-row block) or,
// with kGroups = 1, the quantizer warps' K8. Each group writes its scale to scale[group].
template <int kRows, int kDim, int kThreads, int kGroups>
__global__ void __launch_bounds__(kThreads) code_rows_kernel(const uint16_t* __restrict__ x, int8_t* __restrict__ codes,
                                                             float* __restrict__ scale, int valid) {
  constexpr int kBlockBytes = kRows * 128;  // one 64-channel block of FP16 rows
  constexpr int kGroupThreads = kThreads / kGroups;
  extern __shared__ __align__(1024) char smem[];
  char* src = smem;
  char* dst = src + kDim / 64 * kBlockBytes;
  float* scratch = reinterpret_cast<float*>(dst + kRows * kDim);
  const int tid = threadIdx.x, group = tid / kGroupThreads;
  for (int i = tid; i < kRows * kDim / 8; i += kThreads) {
    const int row = i / (kDim / 8), chunk = i % (kDim / 8);
    *reinterpret_cast<uint4*>(src + channel_blocked_offset(row, chunk, kBlockBytes)) =
        *reinterpret_cast<const uint4*>(x + row * kDim + chunk * 8);
  }
  __syncthreads();
  float s;
  if constexpr (kGroups == 1) {
    s = quantize_resident_rows<kRows, kDim, kThreads>(src, kBlockBytes, dst, valid, tid, scratch, 1);
  } else {
    static_assert(kGroups == 2, "each consumer warpgroup codes half of the query tile");
    s = quantize_resident_half<kRows, kDim, kGroupThreads>(src, kBlockBytes, dst, valid, group * (kRows / 2),
                                                           tid % kGroupThreads, scratch + group * (kGroupThreads / 32),
                                                           1 + group);
  }
  __syncthreads();
  for (int i = tid; i < kRows * kDim; i += kThreads) {
    const int row = i / kDim, byte = i % kDim;
    codes[i] = static_cast<int8_t>(dst[int8_rows_offset<kDim>(row, byte)]);
  }
  if (tid % kGroupThreads == 0) scale[group] = s;
}

template <int kRows, int kDim>
int launch(const uint16_t* x, int8_t* codes, float* scales, int valid, const std::string& context) {
  // The kernel's two callers: the consumer warpgroups (Q8) and the quantizer warps (K8).
  constexpr bool kQueries = kRows == kPrefillBlockM;
  constexpr int kGroups = kQueries ? PrefillConfigWs<kDim>::kConsumerWarpgroups : 1;
  constexpr int kThreads = kQueries ? PrefillConfigWs<kDim>::kThreads : 32 * PrefillConfigWs<kDim>::kQuantizerWarps;
  constexpr int kSmemBytes = kRows * 2 * kDim + kRows * kDim + 4 * (kThreads / 32);
  const auto kernel = code_rows_kernel<kRows, kDim, kThreads, kGroups>;
  TILEMIX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes), context);
  kernel<<<1, kThreads, kSmemBytes>>>(x, codes, scales, valid);
  return kGroups;
}

}  // namespace

ResidentCodes code_resident_rows(const std::vector<uint16_t>& x, int rows, int d, int valid) {
  const std::string context = "code_resident_rows(rows=" + std::to_string(rows) + " d=" + std::to_string(d) +
                              " valid=" + std::to_string(valid) + ")";
  if ((rows != kPrefillBlockM && rows != kPrefillBlockN) || (d != 64 && d != 128) || valid <= 0 || valid > rows ||
      x.size() != static_cast<size_t>(rows) * d) {
    throw std::invalid_argument(context + ": rows 128 or 64, d 64 or 128, 0 < valid <= rows, rows x d values");
  }
  // One scale per coding group: at most the consumer warpgroups.
  constexpr int kMaxGroups = PrefillConfigWs<128>::kConsumerWarpgroups;
  DeviceBuffer dx = to_device(x), dcodes(x.size()), dscales(kMaxGroups * sizeof(float));
  dcodes.poison();
  dscales.poison();
  const auto* xp = dx.as<const uint16_t>();
  auto* cp = dcodes.as<int8_t>();
  auto* sp = dscales.as<float>();
  int groups = 0;
  if (rows == kPrefillBlockM) {
    groups = d == 64 ? launch<kPrefillBlockM, 64>(xp, cp, sp, valid, context)
                     : launch<kPrefillBlockM, 128>(xp, cp, sp, valid, context);
  } else {
    groups = d == 64 ? launch<kPrefillBlockN, 64>(xp, cp, sp, valid, context)
                     : launch<kPrefillBlockN, 128>(xp, cp, sp, valid, context);
  }
  TILEMIX_LAUNCH_CHECK("code_rows_kernel", context);
  device_synchronize(context);
  ResidentCodes out;
  out.codes = to_host<int8_t>(dcodes, x.size());
  out.scales = to_host<float>(dscales, groups);
  return out;
}

}  // namespace tilemix::gpu
