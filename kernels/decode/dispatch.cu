// The one dispatch point of the decode kernels: checks a call, picks the head chunking and the row
// configuration, launches the split-K kernel and, when some sequence has several splits, the combine.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/decode/decode_shape.hpp"
#include "kernels/common/check.cuh"
#include "kernels/decode/config.hpp"
#include "kernels/decode/params.cuh"
#include "kernels/decode/plan.hpp"
#include "kernels/decode/launch.hpp"
#include "tilemix/decode.hpp"

namespace tilemix::gpu {
namespace {

constexpr float kLog2e = 1.44269504088896340736f;

std::string describe(const DecodeParams& p, const char* kernel) {
  return std::string(kernel) + "(d=" + std::to_string(p.d) + " hq=" + std::to_string(p.hq) +
         " hk=" + std::to_string(p.hk) + " batch=" + std::to_string(p.batch) +
         " total_new=" + std::to_string(p.total_new) + " max_new_tokens=" + std::to_string(p.max_new_tokens) +
         " total_splits=" + std::to_string(p.total_splits) + ")";
}

void require(bool ok, const std::string& context, const std::string& what) {
  if (!ok) throw std::invalid_argument(context + ": " + what);
}

// Checks what the kernels rely on; returns false when the call has no work.
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
  require(p.total_splits >= p.batch && p.total_splits <= 0x7fffffff, context,
          "total_splits=" + std::to_string(p.total_splits) + " must be in [batch, 2^31)");
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
  require(p.total_splits == p.batch || (p.workspace && p.arrivals), context,
          "workspace and arrivals are required when a sequence has more than one split "
          "(decode_workspace_bytes, decode_arrival_bytes)");
  return true;
}

// The current device's multiprocessors (the wave size of the combine's choices).
int current_sm_count(const std::string& context) {
  int device = 0, sms = 0;
  TILEMIX_CUDA_CHECK(cudaGetDevice(&device), context);
  TILEMIX_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), context);
  return sms;
}

// What the combine of a call with several splits per sequence waits for (`p.combine_wait`
// resolved). Automatic: per sequence only when sequences end at different times, i.e. several
// sequences over several waves (decode v13: -3% at 16k x 64 x 16 new tokens; within one wave, or
// with a single sequence, up to 3% slower than the wait for the grid).
DecodeCombineWait resolve_combine(const DecodeParams& p, DecodeCache cache, int rows, DecodeMainloop mainloop,
                                  int head_chunks, int sm_count) {
  if (p.combine_wait != DecodeCombineWait::automatic) return p.combine_wait;
  const int64_t wave = static_cast<int64_t>(sm_count) * decode_resident_ctas(cache, rows, mainloop);
  const bool spans_waves = p.total_splits * p.hk * head_chunks > wave;
  return p.batch > 1 && spans_waves ? DecodeCombineWait::sequence : DecodeCombineWait::grid;
}

template <int kHeadDim, DecodeCache kCache>
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
  const int heads_per_kv = p.hq / p.hk;
  const int heads_per_cta = decode_heads_per_cta(p.hq, p.hk, p.max_new_tokens);
  const int head_chunks = decode_head_chunks(p.hq, p.hk, p.max_new_tokens);
  require(p.total_splits * p.hk * head_chunks <= 0x7fffffff, context,
          "total splits x hk x head chunks exceeds the grid");

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
  const bool has_combine = p.total_splits > p.batch;
  if (has_combine) {
    const size_t rows = static_cast<size_t>(p.total_splits) * p.hq * kMaxDecodeTokens;
    k.ws_ml = static_cast<float2*>(p.workspace);
    k.ws_o = reinterpret_cast<float*>(k.ws_ml + rows);
    k.arrivals = p.arrivals;
  }
  const int rows = decode_cta_rows(p.hq, p.hk, p.max_new_tokens);
  const DecodeCache cache = int8 ? DecodeCache::int8 : DecodeCache::fp16;
  const DecodeMainloop mainloop = decode_mainloop(p.mainloop, cache, p.d, rows);
  const int sm_count = has_combine ? current_sm_count(context) : 0;
  const DecodeCombineWait combine = has_combine ? resolve_combine(p, cache, rows, mainloop, head_chunks, sm_count)
                                                : DecodeCombineWait::automatic;
  k.per_sequence_combine = combine == DecodeCombineWait::sequence;
  k.total_new = p.total_new;
  k.total_splits = p.total_splits;
  k.cache_row_bytes = static_cast<int64_t>(p.hk) * p.d * (int8 ? 1 : 2);
  k.batch = p.batch;
  k.hq = p.hq;
  k.hk = p.hk;
  k.heads_per_kv = heads_per_kv;
  k.heads_per_cta = heads_per_cta;
  k.head_chunks = head_chunks;
  k.scale_log2 = p.softmax_scale * kLog2e;  // fp32 product, as the emulator forms it

  if (mainloop == DecodeMainloop::wgmma) {
    require(decode_wgmma_applies(cache, p.d, rows), context,
            "the wgmma mainloop needs the INT8 cache, d=128 and at most 64 query rows per CTA (got " +
                std::string(int8 ? "int8" : "fp16") + ", d=" + std::to_string(p.d) + ", " + std::to_string(rows) +
                " rows)");
    launch_decode_wgmma(k, p.routes, p.total_splits, stream, context);
  } else if (int8) {
    p.d == 64 ? launch_rows<64, DecodeCache::int8>(rows, k, p.total_splits, stream, context)
              : launch_rows<128, DecodeCache::int8>(rows, k, p.total_splits, stream, context);
  } else {
    p.d == 64 ? launch_rows<64, DecodeCache::fp16>(rows, k, p.total_splits, stream, context)
              : launch_rows<128, DecodeCache::fp16>(rows, k, p.total_splits, stream, context);
  }
  if (has_combine) launch_decode_combine(k, p.d, sm_count, stream, context);
}

}  // namespace

DecodeCombineWait decode_combine_used(const DecodeParams& p, bool int8_cache) {
  const std::string context = describe(p, "decode_combine_used");
  if (!validate(p, int8_cache, context) || p.total_splits == p.batch) return DecodeCombineWait::automatic;
  const int rows = decode_cta_rows(p.hq, p.hk, p.max_new_tokens);
  const DecodeCache cache = int8_cache ? DecodeCache::int8 : DecodeCache::fp16;
  return resolve_combine(p, cache, rows, decode_mainloop(p.mainloop, cache, p.d, rows),
                         decode_head_chunks(p.hq, p.hk, p.max_new_tokens), current_sm_count(context));
}

void decode_int8(const DecodeParams& p, void* stream) { run(p, true, stream, "decode_int8"); }
void decode_fp16(const DecodeParams& p, void* stream) { run(p, false, stream, "decode_fp16"); }

}  // namespace tilemix::gpu
