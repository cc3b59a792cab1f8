// The one dispatch point of the prefill kernels: checks a call, maps its runtime values (d,
// numerics, mode) onto a compiled instance, and launches it.
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/quant_fp8.hpp"
#include "kernels/prefill/launch.hpp"
#include "kernels/prefill/params.cuh"
#include "kernels/prefill/tile_sizes.hpp"
#include "kernels/quant/smooth_keys.hpp"
#include "tilemix/attention.hpp"
#include "tilemix/gpu.hpp"

namespace tilemix::gpu {
namespace {

constexpr float kLog2e = 1.44269504088896340736f;
// TMA coordinates are signed 32-bit: the warp-specialized kernel takes tensors of fewer tokens.
constexpr int64_t kWsMaxTokens = int64_t{1} << 31;

std::string describe(const PrefillParams& p, const char* kernel, bool routed) {
  std::string s = std::string(kernel) + "(d=" + std::to_string(p.d) + " hq=" + std::to_string(p.hq) +
                  " hk=" + std::to_string(p.hk) + " batch=" + std::to_string(p.batch) +
                  " total_q=" + std::to_string(p.total_q) + " total_k=" + std::to_string(p.total_k) +
                  " max_seqlen_q=" + std::to_string(p.max_seqlen_q) + " causal=" + (p.causal ? "1" : "0") +
                  " state=" + to_string(p.numerics.state) + " accum=" + to_string(p.numerics.accum);
  if (routed) {
    s += std::string(" mode=") + to_string(p.numerics.mode) + (p.numerics.smooth_k ? " smooth_k" : "");
    if (p.numerics.pv != PvPrecision::fp16) s += std::string(" pv=") + to_string(p.numerics.pv);
  }
  s += std::string(" mainloop=") + to_string(p.mainloop);
  return s + ")";
}

void require(bool ok, const std::string& context, const std::string& what) {
  if (!ok) throw std::invalid_argument(context + ": " + what);
}

// A resolved mainloop, once it is known to run on the current device of compute capability `cc`
// (else invalid_argument naming the device).
PrefillMainloop runnable_mainloop(PrefillMainloop mainloop, ComputeCapability cc) {
  if (!prefill_mainloop_runs_on(mainloop, cc)) require_prefill_mainloop_runs(mainloop, cc, current_device_name());
  return mainloop;
}

// Checks what the kernels rely on (p.mainloop resolved); returns false when the call has no work.
bool validate(const PrefillParams& p, const std::string& context, bool routed) {
  require(prefill_supports_head_dim(p.d), context, "unsupported head dimension d=" + std::to_string(p.d) +
                                                       " (supported: 64, 128)");
  require(p.numerics.state == StatePrecision::fp32 || p.numerics.state == StatePrecision::fp16, context,
          "unsupported state precision " + std::to_string(static_cast<int>(p.numerics.state)));
  require(p.numerics.accum == AccumPrecision::fp32 || p.numerics.accum == AccumPrecision::fp16, context,
          "unsupported accumulation precision " + std::to_string(static_cast<int>(p.numerics.accum)));
  if (routed) {
    require(p.numerics.mode == QuantMode::quantize_once || p.numerics.mode == QuantMode::on_the_fly, context,
            "unsupported quantization mode " + std::to_string(static_cast<int>(p.numerics.mode)));
    if (p.numerics.pv != PvPrecision::fp16) {
      require(p.mainloop == PrefillMainloop::warp_specialized, context,
              std::string("pv=") + to_string(p.numerics.pv) + " runs on the warp_specialized mainloop alone (sm_90)");
      require(p.numerics.accum == AccumPrecision::fp32, context,
              std::string("pv=") + to_string(p.numerics.pv) + " accumulates in fp32 (accum fp16 given)");
    }
  }
  require(p.hq > 0 && p.hk > 0 && p.hq % p.hk == 0, context, "hq must be a positive multiple of hk");
  require(p.hq <= 65535 && p.batch >= 0 && p.batch <= 65535, context, "hq and batch must be at most 65535");
  require(std::isfinite(p.softmax_scale) && p.softmax_scale > 0.0f, context,
          "softmax_scale must be positive and finite (resolve the 1/sqrt(d) default first)");
  require(p.max_seqlen_q >= 0 && p.total_q >= 0 && p.total_k >= 0, context, "negative lengths");
  const int64_t query_tiles = (p.max_seqlen_q + kPrefillBlockM - 1) / kPrefillBlockM;
  require(query_tiles <= std::numeric_limits<int>::max(), context, "max_seqlen_q too large for the grid");
  if (p.batch == 0 || p.max_seqlen_q == 0 || p.total_q == 0) return false;
  require(p.q && p.k && p.v && p.o && p.cu_seqlens_q && p.cu_seqlens_k, context,
          "q, k, v, o, cu_seqlens_q and cu_seqlens_k must be device pointers");
  require(reinterpret_cast<uintptr_t>(p.work_tile_counters) % alignof(uint64_t) == 0, context,
          "work_tile_counters must be 8-byte aligned");
  if (routed) {
    require(p.words && p.tile_offset && p.group && p.total_query_tiles > 0, context,
            "words, tile_offset, group and total_query_tiles are required");
    require(p.numerics.pv == PvPrecision::fp16 || (p.v8 && p.v_scale && p.k_block_offset && p.k_blocks > 0) ||
                p.total_k == 0,
            context, "FP8 P V needs v8, v_scale and the K block offsets (written by quantize_values_fp8)");
  }
  return true;
}

KernelParams kernel_params(const PrefillParams& p) {
  KernelParams k{};
  k.q = static_cast<const __half*>(p.q);
  k.k = static_cast<const __half*>(p.k);
  k.v = static_cast<const __half*>(p.v);
  k.o = static_cast<__half*>(p.o);
  k.lse = p.lse;
  k.cu_seqlens_q = p.cu_seqlens_q;
  k.cu_seqlens_k = p.cu_seqlens_k;
  k.words = p.words;
  k.tile_offset = p.tile_offset;
  k.group = p.group;
  k.total_query_tiles = p.total_query_tiles;
  k.q8 = p.q8;
  k.k8 = p.k8;
  k.q_scale = p.q_scale;
  k.k_scale = p.k_scale;
  k.q_block_offset = p.q_block_offset;
  k.k_block_offset = p.k_block_offset;
  k.v8 = p.v8;
  k.v_scale = p.v_scale;
  k.v8_columns = p.k_blocks * kBlockV;
  static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "the counters are the device's 64-bit atomics");
  k.work_tile_counters = reinterpret_cast<unsigned long long*>(p.work_tile_counters);
  k.total_q = p.total_q;
  k.q8_row_bytes = static_cast<int64_t>(p.hq) * p.d;
  k.k8_row_bytes = static_cast<int64_t>(p.hk) * p.d;
  k.q_row_bytes = 2 * k.q8_row_bytes;
  k.kv_row_bytes = 2 * k.k8_row_bytes;
  k.hq = p.hq;
  k.hk = p.hk;
  k.heads_per_kv = p.hq / p.hk;
  k.scale_log2 = p.softmax_scale * kLog2e;  // fp32 product, as the emulator forms it
  k.causal = p.causal;
  k.fp16_state = p.numerics.state == StatePrecision::fp16;
  return k;
}

LaunchShape launch_shape(const PrefillParams& p) {
  return LaunchShape{(p.max_seqlen_q + kPrefillBlockM - 1) / kPrefillBlockM, p.hq, p.batch};
}

template <ScorePaths kPaths>
void launch(const PrefillParams& p, void* stream, const std::string& context) {
  const KernelParams k = kernel_params(p);
  const LaunchShape shape = launch_shape(p);
  const bool accum_half = p.numerics.accum == AccumPrecision::fp16;
  if constexpr (kPaths != ScorePaths::fp16) {
    if (p.numerics.pv != PvPrecision::fp16) {
      // FP8 P V: the warp-specialized kernel alone (fp32 accumulation, checked above).
      require(p.total_q < kWsMaxTokens && p.total_k < kWsMaxTokens, context,
              "the warp_specialized mainloop needs fewer than 2^31 tokens per tensor");
      const PrefillTensors tensors{p.total_q, p.total_k};
      const bool all = p.numerics.pv == PvPrecision::fp8;
      if (p.d == 64) {
        all ? launch_prefill_ws<64, kPaths, false, PvPaths::fp8>(k, tensors, shape, p.uniform_steps, stream, context)
            : launch_prefill_ws<64, kPaths, false, PvPaths::routed>(k, tensors, shape, p.uniform_steps, stream, context);
      } else {
        all ? launch_prefill_ws<128, kPaths, false, PvPaths::fp8>(k, tensors, shape, p.uniform_steps, stream, context)
            : launch_prefill_ws<128, kPaths, false, PvPaths::routed>(k, tensors, shape, p.uniform_steps, stream,
                                                                     context);
      }
      return;
    }
  }
  if (p.mainloop == PrefillMainloop::warp_specialized) {
    require(p.total_q < kWsMaxTokens && p.total_k < kWsMaxTokens, context,
            "the warp_specialized mainloop needs fewer than 2^31 tokens per tensor");
    const PrefillTensors tensors{p.total_q, p.total_k};
    if (p.d == 64) {
      accum_half ? launch_prefill_ws<64, kPaths, true>(k, tensors, shape, p.uniform_steps, stream, context)
                 : launch_prefill_ws<64, kPaths, false>(k, tensors, shape, p.uniform_steps, stream, context);
    } else {
      accum_half ? launch_prefill_ws<128, kPaths, true>(k, tensors, shape, p.uniform_steps, stream, context)
                 : launch_prefill_ws<128, kPaths, false>(k, tensors, shape, p.uniform_steps, stream, context);
    }
  } else if (p.d == 64) {
    accum_half ? launch_prefill<64, kPaths, true>(k, shape, stream, context)
               : launch_prefill<64, kPaths, false>(k, shape, stream, context);
  } else if (accum_half) {
    launch_prefill<128, kPaths, true>(k, shape, stream, context);
  } else if (p.mainloop == PrefillMainloop::mma_sync) {
    launch_prefill<128, kPaths, false>(k, shape, stream, context);
  } else {
    // d = 128, fp32 P V accumulation on `wgmma`: the wgmma (sm_90a) kernel (automatic takes it for
    // on_the_fly on sm_90: tilemix_mainloop).
    launch_prefill_sm90<kPaths>(k, shape, stream, context);
  }
}

}  // namespace

TileGeometry tilemix_geometry(int d) { return prefill_geometry(d, "tilemix_geometry"); }
TileGeometry flash_geometry(int d) { return prefill_geometry(d, "flash_geometry"); }
PrefillEmulation prefill_emulation(PrefillMainloop mainloop) { return emulation_of(mainloop); }

void tilemix_prefill(const PrefillParams& p, void* stream) {
  const std::string context = describe(p, "tilemix_prefill", true);
  // Key smoothing leaves the kernel as it is: it reads Ks as its K (quantize_once: quantize_keys
  // coded Ks), and the LSE gets q . kbar back after it.
  PrefillParams routed = p;
  const ComputeCapability cc = current_compute_capability();
  routed.mainloop = runnable_mainloop(tilemix_mainloop(p.mainloop, p.numerics, cc), cc);
  if (!validate(routed, context, true)) return;
  if (p.numerics.smooth_k) {
    require(p.k_smoothed && p.qkbar, context, "smooth_k needs k_smoothed and qkbar (written by smooth_keys)");
    routed.k = p.k_smoothed;
  }
  if (p.numerics.mode == QuantMode::on_the_fly) {
    launch<ScorePaths::routed_on_the_fly>(routed, stream, context);
  } else {
    launch<ScorePaths::routed_quantize_once>(routed, stream, context);
  }
  if (p.numerics.smooth_k) add_query_key_means_to_lse(p, stream, context);
}

void flash_fp16_prefill(const PrefillParams& p, void* stream) {
  const std::string context = describe(p, "flash_fp16_prefill", false);
  PrefillParams flash = p;
  const ComputeCapability cc = current_compute_capability();
  flash.mainloop = runnable_mainloop(flash_mainloop(p.mainloop, cc), cc);
  if (!validate(flash, context, false)) return;
  launch<ScorePaths::fp16>(flash, stream, context);
}

}  // namespace tilemix::gpu
