#pragma once
// The compiled instances of the prefill kernel and their launcher. Plain C++ apart from the
// stream handle; dispatch.cu maps runtime values onto these instances.
#include <cstdint>
#include <string>

namespace tilemix::gpu {

struct KernelParams;

// Which score paths a kernel instance contains.
enum class ScorePaths {
  fp16,                  // flash_fp16: no routing
  routed_quantize_once,  // tilemix: INT8 tiles read K8 (quantize_keys) and Q8 (quantize_queries, or coded on chip)
  routed_on_the_fly,     // tilemix: INT8 tiles quantize Q/K on chip
};

// P V products of the warp-specialized kernel: FP16 on every tile, FP8 on every tile (pv fp8), or
// FP8 on the INT8-routed tiles and FP16 on the others (pv routed).
enum class PvPaths { fp16, fp8, routed };

struct LaunchShape {
  int64_t query_tiles = 0;  // ceil(max_seqlen_q / BLOCK_M)
  int heads = 0;
  int batch = 0;
};

// Token counts of the packed Q and K/V tensors (the extents of the TMA tensor maps).
struct PrefillTensors {
  int64_t total_q = 0, total_k = 0;
};

// Launches one instance on `stream` (a cudaStream_t); `context` names the call in errors.
template <int kHeadDim, ScorePaths kPaths, bool kAccumHalf>
void launch_prefill(const KernelParams& params, const LaunchShape& shape, void* stream, const std::string& context);

// The wgmma (sm_90a) kernel, for d = 128 with fp32 P V accumulation, every score path (launch_prefill
// serves d = 64 and fp16 accumulation).
template <ScorePaths kPaths>
void launch_prefill_sm90(const KernelParams& params, const LaunchShape& shape, void* stream, const std::string& context);

// The warp-specialized kernel (sm_90a, TMA, persistent): d = 64 and 128, fp32 and fp16 P V
// accumulation (kAccumHalf), every score path, token counts below 2^31 (TMA coordinates are
// 32-bit). uniform_steps: both key tiles of every step take one route
// (PrefillParams). kPv: the P V products (FP8 ones: tilemix, fp32 accumulation).
template <int kHeadDim, ScorePaths kPaths, bool kAccumHalf, PvPaths kPv = PvPaths::fp16>
void launch_prefill_ws(const KernelParams& params, const PrefillTensors& tensors, const LaunchShape& shape,
                       bool uniform_steps, void* stream, const std::string& context);

}  // namespace tilemix::gpu
