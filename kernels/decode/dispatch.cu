// The one dispatch point of the decode kernels: checks a call against its launch plan, launches
// the split-K kernel the plan names and, when the plan cuts some sequence, the combine.
#include <cuda_runtime.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/decode/config.hpp"
#include "kernels/decode/launch.hpp"
#include "kernels/decode/params.cuh"
#include "kernels/decode/plan.hpp"
#include "tilemix/decode.hpp"
#include "tilemix/gpu.hpp"

namespace tilemix::gpu {
namespace {

constexpr float kLog2e = 1.44269504088896340736f;

int64_t total_splits(const DecodeParams& p) { return p.plan ? p.plan->splits.total_splits() : 0; }

std::string describe(const DecodeParams& p, const char* kernel) {
  return std::string(kernel) + "(d=" + std::to_string(p.d) + " hq=" + std::to_string(p.hq) +
         " hk=" + std::to_string(p.hk) + " batch=" + std::to_string(p.batch) +
         " total_new=" + std::to_string(p.total_new) + " max_new_tokens=" + std::to_string(p.max_new_tokens) +
         " total_splits=" + std::to_string(total_splits(p)) + ")";
}

void require(bool ok, const std::string& context, const std::string& what) {
  if (!ok) throw std::invalid_argument(context + ": " + what);
}

// Checks what the kernels rely on, and that the launch plan was made for this call; returns false
// when the call has no work.
bool validate(const DecodeParams& p, bool int8, const std::string& context) {
  require(p.d == 64 || p.d == 128, context, "unsupported head dimension d=" + std::to_string(p.d) +
                                                " (supported: 64, 128)");
  require(p.hq > 0 && p.hk > 0 && p.hq % p.hk == 0, context,
          "hq=" + std::to_string(p.hq) + " must be a positive multiple of hk=" + std::to_string(p.hk));
  require(p.hk <= 65535, context, "unsupported hk=" + std::to_string(p.hk) + " (at most 65535)");
  require(p.batch >= 0, context, "negative batch " + std::to_string(p.batch));
  if (p.batch == 0) return false;
  require(p.max_new_tokens >= 1 && p.max_new_tokens <= kMaxDecodeTokens, context,
          "unsupported max_new_tokens=" + std::to_string(p.max_new_tokens) + " (1.." +
              std::to_string(kMaxDecodeTokens) + ")");
  require(p.total_new >= p.batch && p.total_new <= static_cast<int64_t>(p.batch) * p.max_new_tokens, context,
          "total_new=" + std::to_string(p.total_new) + " does not fit batch and max_new_tokens");
  require(std::isfinite(p.softmax_scale) && p.softmax_scale > 0.0f, context,
          "softmax_scale must be positive and finite (resolve the 1/sqrt(d) default first)");
  require(p.plan != nullptr, context, "a launch plan is required (plan_decode_launch)");
  const DecodeLaunchPlan& plan = *p.plan;
  // The device is read for the wgmma mainloop alone (not on every mma.sync call), its name on failure.
  if (plan.mainloop == DecodeMainloop::wgmma) {
    const ComputeCapability cc = current_compute_capability();
    if (!decode_mainloop_runs_on(plan.mainloop, cc)) {
      try {
        require_decode_mainloop_runs(plan.mainloop, cc, current_device_name());
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(context + ": " + e.what());
      }
    }
  }
  require(plan.cache == (int8 ? CacheKind::int8 : CacheKind::fp16) && plan.hq == p.hq && plan.hk == p.hk &&
              plan.d == p.d && plan.max_new_tokens == p.max_new_tokens &&
              plan.splits.split_offset.size() == static_cast<size_t>(p.batch) + 1,
          context, "the launch plan was made for another cache or shape");
  require(total_splits(p) >= p.batch && total_splits(p) <= 0x7fffffff, context,
          "total_splits=" + std::to_string(total_splits(p)) + " must be in [batch, 2^31)");
  require(p.cache.batch == p.batch && p.cache.hk == p.hk && p.cache.d == p.d, context,
          "the cache view has batch=" + std::to_string(p.cache.batch) + " hk=" + std::to_string(p.cache.hk) +
              " d=" + std::to_string(p.cache.d));
  require(p.q && p.o && p.cu_new && p.cache_len && p.split_offset && p.split_first_tile && p.cache.cu_capacity &&
              p.cache.cu_blocks,
          context,
          "q, o, cu_new, cache_len, split_offset, split_first_tile, cu_capacity and cu_blocks must be device pointers");
  if (int8) {
    require(p.cache.k8 && p.cache.v8 && p.cache.k_scale && p.cache.v_scale, context,
            "an INT8 cache needs k8, v8, k_scale and v_scale");
    require(p.words && p.group, context, "words and group are required (the routing of the INT8 cache)");
  } else {
    require(p.cache.k && p.cache.v, context, "an FP16 cache needs k and v");
  }
  require(!plan.splits.has_cuts() || (p.workspace && p.arrivals), context,
          "workspace and arrivals are required when a sequence has more than one split "
          "(decode_workspace_bytes, decode_arrival_bytes)");
  return true;
}

template <int kHeadDim, CacheKind kCache>
void launch_rows(int rows, const DecodeKernelParams& k, int64_t total_splits, void* stream,
                 const std::string& context) {
  switch (decode_row_config(rows)) {
    case 8: return launch_decode<kHeadDim, 8, kCache>(k, total_splits, stream, context);
    case 16: return launch_decode<kHeadDim, 16, kCache>(k, total_splits, stream, context);
    case 32: return launch_decode<kHeadDim, 32, kCache>(k, total_splits, stream, context);
    case 64: return launch_decode<kHeadDim, 64, kCache>(k, total_splits, stream, context);
    default: return launch_decode<kHeadDim, kDecodeMaxRows, kCache>(k, total_splits, stream, context);
  }
}

void run(const DecodeParams& p, bool int8, void* stream, const char* name) {
  const std::string context = describe(p, name);
  if (!validate(p, int8, context)) return;
  const DecodeLaunchPlan& plan = *p.plan;
  require(plan.ctas <= 0x7fffffff, context, "total splits x hk x head chunks exceeds the grid");

  DecodeKernelParams k{};
  k.q = static_cast<const __half*>(p.q);
  k.o = static_cast<__half*>(p.o);
  k.lse = p.lse;
  k.cu_new = p.cu_new;
  k.cache_len = p.cache_len;
  k.cu_capacity = p.cache.cu_capacity;
  k.cu_blocks = p.cache.cu_blocks;
  k.k = static_cast<const char*>(int8 ? static_cast<const void*>(p.cache.k8) : p.cache.k);
  k.v = static_cast<const char*>(int8 ? static_cast<const void*>(p.cache.v8) : p.cache.v);
  k.k_scale = p.cache.k_scale;
  k.v_scale = p.cache.v_scale;
  k.words = p.words;
  k.group = p.group;
  k.split_offset = p.split_offset;
  k.split_first_tile = p.split_first_tile;
  k.timeline = p.timeline;
  const int64_t splits = plan.splits.total_splits();
  if (plan.splits.has_cuts()) {
    const size_t rows = static_cast<size_t>(splits) * p.hq * kMaxDecodeTokens;
    k.ws_ml = static_cast<float2*>(p.workspace);
    k.ws_o = reinterpret_cast<float*>(k.ws_ml + rows);
    k.arrivals = p.arrivals;
  }
  k.per_sequence_combine = plan.combine == DecodeCombineWait::sequence;
  k.total_new = p.total_new;
  k.total_splits = splits;
  k.cache_row_bytes = static_cast<int64_t>(p.hk) * p.d * (int8 ? 1 : 2);
  k.batch = p.batch;
  k.hq = p.hq;
  k.hk = p.hk;
  k.heads_per_kv = p.hq / p.hk;
  k.heads_per_cta = plan.heads_per_cta;
  k.head_chunks = plan.head_chunks;
  k.scale_log2 = p.softmax_scale * kLog2e;  // fp32 product, as the emulator forms it

  if (plan.mainloop == DecodeMainloop::wgmma) {
    require(decode_wgmma_applies(plan.cache, p.d, plan.cta_rows), context,
            "the wgmma mainloop needs the INT8 cache, d=128 and at most 64 query rows per CTA (got " +
                std::string(int8 ? "int8" : "fp16") + ", d=" + std::to_string(p.d) + ", " +
                std::to_string(plan.cta_rows) + " rows)");
    launch_decode_wgmma(k, p.routes, splits, stream, context);
  } else if (int8) {
    p.d == 64 ? launch_rows<64, CacheKind::int8>(plan.cta_rows, k, splits, stream, context)
              : launch_rows<128, CacheKind::int8>(plan.cta_rows, k, splits, stream, context);
  } else {
    p.d == 64 ? launch_rows<64, CacheKind::fp16>(plan.cta_rows, k, splits, stream, context)
              : launch_rows<128, CacheKind::fp16>(plan.cta_rows, k, splits, stream, context);
  }
  if (plan.splits.has_cuts()) launch_decode_combine(k, p.d, plan.sm_count, stream, context);
}

}  // namespace

void decode_int8(const DecodeParams& p, void* stream) { run(p, true, stream, "decode_int8"); }
void decode_fp16(const DecodeParams& p, void* stream) { run(p, false, stream, "decode_fp16"); }

}  // namespace tilemix::gpu
