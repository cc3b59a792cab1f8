// gpu::code_resident_rows: one CTA lays a block out as the warp-specialized kernel's shared memory
// holds it (64-channel blocks of 128-byte rows in the 128-byte swizzle) and codes it with
// quantize_resident_rows, as the consumers code Q8 (128 rows, 256 threads) and the quantizer
// warps K8 (64 rows, 96 threads).
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

template <int kRows, int kDim, int kThreads>
__global__ void __launch_bounds__(kThreads) code_rows_kernel(const uint16_t* __restrict__ x, int8_t* __restrict__ codes,
                                                             float* __restrict__ scale, int valid) {
  constexpr int kBlockBytes = kRows * 128;  // one 64-channel block of FP16 rows
  extern __shared__ __align__(1024) char smem[];
  char* src = smem;
  char* dst = src + kDim / 64 * kBlockBytes;
  float* scratch = reinterpret_cast<float*>(dst + kRows * kDim);
  const int tid = threadIdx.x;
  for (int i = tid; i < kRows * kDim / 8; i += kThreads) {
    const int row = i / (kDim / 8), chunk = i % (kDim / 8);
    *reinterpret_cast<uint4*>(src + (chunk / 8) * kBlockBytes + sw128_offset(row, (chunk % 8) * 16)) =
        *reinterpret_cast<const uint4*>(x + row * kDim + chunk * 8);
  }
  __syncthreads();
  const float s = quantize_resident_rows<kRows, kDim, kThreads>(src, kBlockBytes, dst, valid, tid, scratch, 1);
  __syncthreads();
  for (int i = tid; i < kRows * kDim; i += kThreads) {
    const int row = i / kDim, byte = i % kDim;
    codes[i] = static_cast<int8_t>(dst[int8_rows_offset<kDim>(row, byte)]);
  }
  if (tid == 0) *scale = s;
}

template <int kRows, int kDim>
void launch(const uint16_t* x, int8_t* codes, float* scale, int valid, const std::string& context) {
  // The thread counts of the kernel's two callers.
  constexpr int kThreads = kRows == kPrefillBlockM ? PrefillConfigWs<kDim>::kThreads
                                                   : 32 * PrefillConfigWs<kDim>::kQuantizerWarps;
  constexpr int kSmemBytes = kRows * 2 * kDim + kRows * kDim + 4 * (kThreads / 32);
  const auto kernel = code_rows_kernel<kRows, kDim, kThreads>;
  TILEMIX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes), context);
  kernel<<<1, kThreads, kSmemBytes>>>(x, codes, scale, valid);
}

}  // namespace

ResidentCodes code_resident_rows(const std::vector<uint16_t>& x, int rows, int d, int valid) {
  const std::string context = "code_resident_rows(rows=" + std::to_string(rows) + " d=" + std::to_string(d) +
                              " valid=" + std::to_string(valid) + ")";
  if ((rows != kPrefillBlockM && rows != kPrefillBlockN) || (d != 64 && d != 128) || valid <= 0 || valid > rows ||
      x.size() != static_cast<size_t>(rows) * d) {
    throw std::invalid_argument(context + ": rows 128 or 64, d 64 or 128, 0 < valid <= rows, rows x d values");
  }
  DeviceBuffer dx = to_device(x), dcodes(x.size()), dscale(sizeof(float));
  dcodes.poison();
  dscale.poison();
  const auto* xp = dx.as<const uint16_t>();
  auto* cp = dcodes.as<int8_t>();
  auto* sp = dscale.as<float>();
  if (rows == kPrefillBlockM) {
    d == 64 ? launch<kPrefillBlockM, 64>(xp, cp, sp, valid, context)
            : launch<kPrefillBlockM, 128>(xp, cp, sp, valid, context);
  } else {
    d == 64 ? launch<kPrefillBlockN, 64>(xp, cp, sp, valid, context)
            : launch<kPrefillBlockN, 128>(xp, cp, sp, valid, context);
  }
  TILEMIX_LAUNCH_CHECK("code_rows_kernel", context);
  device_synchronize(context);
  ResidentCodes out;
  out.codes = to_host<int8_t>(dcodes, x.size());
  out.scale = to_host<float>(dscale, 1)[0];
  return out;
}

}  // namespace tilemix::gpu
