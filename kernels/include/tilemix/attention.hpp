#pragma once
// Plain C++ API of the prefill kernels (no CUDA types): the routed `tilemix` kernel, the
// `flash_fp16` baseline and the Q/K quantization kernels. Pointers are device pointers.
#include <cstdint>
#include <string>

#include "core/choices/compute_capability.hpp"
#include "core/choices/prefill.hpp"
#include "core/problem.hpp"
#include "core/tiling.hpp"

namespace tilemix::gpu {

// Device-side description of one attention call. Layouts follow SPEC 2, 3 and 5.
struct PrefillParams {
  const void* q = nullptr;  // FP16 [total_q, hq, d]
  const void* k = nullptr;  // FP16 [total_k, hk, d]
  const void* v = nullptr;  // FP16 [total_k, hk, d]
  void* o = nullptr;        // FP16 [total_q, hq, d]
  float* lse = nullptr;     // optional FP32 [hq, total_q]
  const int64_t* cu_seqlens_q = nullptr;  // [batch + 1]
  const int64_t* cu_seqlens_k = nullptr;
  int batch = 0;
  int64_t max_seqlen_q = 0;  // sizes the grid
  int64_t total_q = 0, total_k = 0;
  int hq = 0, hk = 0, d = 0;
  bool causal = false;
  float softmax_scale = 0.0f;
  // Routing (tilemix only): words [hk][total_query_tiles], tile_offset [batch + 1] (prefix sums of
  // Tm), group [batch] (g per sequence).
  const uint64_t* words = nullptr;
  const int64_t* tile_offset = nullptr;
  const int* group = nullptr;
  int64_t total_query_tiles = 0;
  // True when both key tiles of every 128-key step of the warp-specialized mainloop take one
  // route (uniform_steps of the plan and words, two tiles per step): its steps then take one
  // score product each. False is always correct.
  bool uniform_steps = false;
  // quantize_once scratch: INT8 codes in the layout of q / k, scales [blocks, heads] with
  // block offsets [batch + 1] (BLKQ = 128 for q, BLKK = 64 for k). Unused by on_the_fly; the
  // warp_specialized mainloop codes Q on chip and reads none of q8, q_scale and q_block_offset.
  int8_t* q8 = nullptr;
  int8_t* k8 = nullptr;
  float* q_scale = nullptr;
  float* k_scale = nullptr;
  const int64_t* q_block_offset = nullptr;
  const int64_t* k_block_offset = nullptr;
  int64_t q_blocks = 0, k_blocks = 0;
  // Key smoothing (numerics.smooth_k, tilemix only; core/quant.hpp): smooth_keys writes kbar
  // [batch, hk, d] (through kbar_partial [k_blocks, hk, d], the BLKK block sums), the smoothed keys
  // k_smoothed (FP16 [total_k, hk, d]) and qkbar [total_q, hq]. quantize_keys then codes k_smoothed
  // in place of k, and tilemix_prefill runs its kernel on k_smoothed and adds fp32(qkbar *
  // softmax_scale) to the LSE. Unused otherwise (flash_fp16_prefill ignores smooth_k).
  float* kbar = nullptr;
  float* qkbar = nullptr;
  float* kbar_partial = nullptr;
  void* k_smoothed = nullptr;
  // FP8 P V (numerics.pv fp8 or routed; core/quant_fp8.hpp): quantize_values_fp8 writes the E4M3
  // codes of V, v8 [hk][d][64 * k_blocks] in the FP8 MMA's key order, and their scales v_scale
  // [k_blocks][hk][d] (V blocks are the 64-key K scale blocks, k_block_offset). Unused otherwise.
  uint8_t* v8 = nullptr;
  float* v_scale = nullptr;
  // The warp_specialized mainloop's work tile counters (optional): kPrefillWorkTileCounters
  // uint64_t, zero before the first call; every call leaves them zero. With them its persistent
  // CTAs take work tiles as they free up; without, CTA i takes tiles i, i + grid, ..., which
  // under a causal mask left one CTA 1.16-1.38x the mean work at 1k-2k tokens (8 x 24 and 4 x 32
  // heads, scripts/work_tile_balance.py). Counters that are not zero at a call make it skip work
  // tiles; calls that run at the same time need counters of their own.
  uint64_t* work_tile_counters = nullptr;
  Numerics numerics;
  // The mainloop (tilemix_mainloop / flash_mainloop resolve automatic; warp_specialized needs
  // fewer than 2^31 tokens per tensor, asking for it otherwise is an error).
  PrefillMainloop mainloop = PrefillMainloop::automatic;
};

// PrefillParams::work_tile_counters: tiles taken, CTAs done.
inline constexpr int kPrefillWorkTileCounters = 2;

// Compute-tile geometry of the routed kernel for head dimension d: the routing plan and the
// emulator must be built with it.
TileGeometry tilemix_geometry(int d);
TileGeometry flash_geometry(int d);
// How the emulator follows a call on a resolved `mainloop` (tilemix_mainloop, flash_mainloop;
// EmulatorOptions' softmax_tiles and fused_score_scale): steps of 2 tiles and the fused scale on
// warp_specialized.
PrefillEmulation prefill_emulation(PrefillMainloop mainloop);
// The mainloop a call asking for `mainloop` runs on, on a GPU of compute capability `cc`.
// Below sm_90 (or past it) automatic takes mma_sync, the one kernel built for every GPU. On sm_90
// it takes the faster kernel of results/h100/prefill-mainloops.json (every d, accumulation, L
// 1k-16k, causal and not; tests/apps/common/test_gpu_support.cpp holds the choice to it):
// warp_specialized for flash_fp16 (0.62-0.88x the older kernels' time) and for tilemix with
// quantize_once (0.62-0.93x), but wgmma (the mma.sync kernel at d = 64 or with fp16 accumulation)
// for on_the_fly, where the warp-specialized kernel's three quantizer warps take 1.24-2.14x their
// time. FP8 P V (pv fp8 / routed) runs on warp_specialized alone (wgmma and mma_sync are refused).
inline PrefillMainloop flash_mainloop(PrefillMainloop mainloop, ComputeCapability cc = {}) {
  if (mainloop != PrefillMainloop::automatic) return mainloop;
  return cc.runs_sm90a() ? PrefillMainloop::warp_specialized : PrefillMainloop::mma_sync;
}
inline PrefillMainloop tilemix_mainloop(PrefillMainloop mainloop, const Numerics& numerics, ComputeCapability cc = {}) {
  if (mainloop != PrefillMainloop::automatic) return mainloop;
  if (!cc.runs_sm90a()) return PrefillMainloop::mma_sync;
  const bool older_faster = numerics.mode == QuantMode::on_the_fly && numerics.pv == PvPrecision::fp16;
  return older_faster ? PrefillMainloop::wgmma : PrefillMainloop::warp_specialized;
}
// Whether a resolved `mainloop` runs on a GPU of compute capability `cc`: wgmma and
// warp_specialized are built for sm_90a alone.
inline bool prefill_mainloop_runs_on(PrefillMainloop mainloop, ComputeCapability cc) {
  return cc.runs_sm90a() || mainloop == PrefillMainloop::mma_sync;
}
// Throws std::invalid_argument naming the GPU, its compute capability and the mainloop where a
// resolved `mainloop` does not run on it.
void require_prefill_mainloop_runs(PrefillMainloop mainloop, ComputeCapability cc, const std::string& gpu);

// Launches on `stream` (a cudaStream_t passed as void*; nullptr = default stream). Throws
// std::invalid_argument for unsupported values (d, numerics) naming the value, and CudaError
// (a std::runtime_error) for CUDA failures naming the call and the shape.
void quantize_queries(const PrefillParams& p, void* stream);  // writes q8 and q_scale
void quantize_keys(const PrefillParams& p, void* stream);     // writes k8 and k_scale (smooth_k: after smooth_keys)
// smooth_k, either mode: kbar, qkbar and k_smoothed, before quantize_keys and tilemix_prefill.
void smooth_keys(const PrefillParams& p, void* stream);
// pv fp8 / routed: v8 and v_scale (v, v8 and cu_seqlens 16-byte aligned as cudaMalloc leaves them).
void quantize_values_fp8(const PrefillParams& p, void* stream);
void tilemix_prefill(const PrefillParams& p, void* stream);  // after the passes of prefill_passes.hpp
void flash_fp16_prefill(const PrefillParams& p, void* stream);

}  // namespace tilemix::gpu
