#pragma once
// Plain C++ API of the routing kernels: the words of layout `adaptive` built on the GPU from Q and
// K, bit for bit those of the CPU builder (core/routing/layouts/adaptive.hpp, whose three steps
// they follow). Pointers are device pointers.
#include <cstdint>

namespace tilemix::gpu {

struct AdaptiveRoutingParams {
  const void* q = nullptr;  // FP16 [total_q, hq, d]
  const void* k = nullptr;  // FP16 [total_k, hk, d]
  const int64_t* cu_seqlens_q = nullptr;  // [batch + 1]
  const int64_t* cu_seqlens_k = nullptr;
  int batch = 0;
  int hq = 0, hk = 0, d = 0;
  float softmax_scale = 0.0f;
  // The AdaptiveSchedule's arrays, as laid out there.
  int block_m = 0;
  const int64_t* tile_offset = nullptr;    // [batch + 1]
  const int* tile_sequence = nullptr;      // [total_tiles]
  const int* tile_groups = nullptr;        // [total_tiles]
  const float* cells = nullptr;            // [total_tiles][64]
  const int64_t* group_offset = nullptr;   // [batch + 1]
  const int64_t* mask_width = nullptr;     // [batch]
  const int64_t* fp16_groups = nullptr;    // [batch]
  int64_t total_tiles = 0, total_groups = 0;
  // Scratch, and the AdaptivePools and scores of the CPU builder: qbar [hk][total_tiles][d],
  // qmax [hk][total_tiles], kbar [hk][total_groups][d], kmax [hk][total_groups],
  // scores [hk][total_tiles][64].
  float* qbar = nullptr;
  float* qmax = nullptr;
  float* kbar = nullptr;
  float* kmax = nullptr;
  float* scores = nullptr;
  uint64_t* words = nullptr;  // written: [hk][total_tiles]
};

// Enqueues the pooling, scoring and selection kernels on `stream` (a cudaStream_t as void*;
// nullptr = default stream). Throws std::invalid_argument for unsupported d, missing pointers or
// q, k or kbar not 16-byte aligned, CudaError for CUDA failures naming the kernel and the shape.
void adaptive_words(const AdaptiveRoutingParams& p, void* stream);

}  // namespace tilemix::gpu
