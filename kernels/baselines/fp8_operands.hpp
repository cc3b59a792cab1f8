#pragma once
// The E4M3 operands of cudnn_fp8 and their per-tensor scales, computed on the device (no host
// round trip): x8 = e4m3(x * scale), x = x8 * descale, scale a power of two so that scaling is
// exact. Inputs keep scale 1 unless their amax exceeds the E4M3 range (448); P is stored with
// scale 256 (P <= 1); O's scale is calibrated from the amax_o that cuDNN reports.
#include <cuda_runtime.h>

#include <cstdint>

namespace tilemix::gpu {

// Slots of the scalar block, each 16 bytes apart (cuDNN tensors are 16-byte aligned).
enum class Fp8Slot : int {
  descale_q, descale_k, descale_v, descale_s, scale_s, scale_o, amax_s, amax_o,  // cuDNN's tensors
  scale_q, scale_k, scale_v, descale_o, amax_q, amax_k, amax_v,
  count
};
constexpr int kFp8SlotFloats = 4;
constexpr size_t kFp8ScalarBytes = static_cast<size_t>(Fp8Slot::count) * kFp8SlotFloats * sizeof(float);

inline float* fp8_slot(void* scalars, Fp8Slot slot) {
  return static_cast<float*>(scalars) + static_cast<int>(slot) * kFp8SlotFloats;
}

// Zeroes the amaxes, measures Q, K and V (FP16, n elements each) and sets the input, P and
// provisional O scales (O's from amax_v, since |O| <= max |V|).
void fp8_measure_inputs(void* scalars, const void* q, int64_t nq, const void* k, const void* v, int64_t nkv,
                        cudaStream_t stream);
// x8[i] = e4m3(x[i] * scale), saturating.
void fp8_quantize(const void* x, int64_t n, const float* scale, uint8_t* x8, cudaStream_t stream);
// After a run: the largest power-of-two O scale that keeps amax_o * scale_o within E4M3.
void fp8_calibrate_output(void* scalars, cudaStream_t stream);
// o[i] = fp16(o8[i] * descale).
void fp8_dequantize(const uint8_t* o8, int64_t n, const float* descale, void* o, cudaStream_t stream);

}  // namespace tilemix::gpu
