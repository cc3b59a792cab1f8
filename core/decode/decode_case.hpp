#pragma once
// A decode case of a config (`"kind": "decode"`) and the ready problem built from it: the new
// queries, the FP16 tokens the cache is filled with, both caches filled by appends in chunks, and
// the routing plan with the decode tile geometry.
#include <cstdint>
#include <vector>

#include "core/choices/decode.hpp"
#include "core/decode/decode_shape.hpp"
#include "core/decode/kv_cache.hpp"
#include "core/routing/plan.hpp"

namespace tilemix {

struct CaseSpec;

struct DecodeCaseSpec {
  DecodeShape shape;  // validated
  CacheKind cache = CacheKind::int8;
  // Appends that fill the cache: the context in append_steps - 1 near-equal chunks, then the new
  // tokens (append_steps = 1: all L_b tokens at once).
  int append_steps = 2;
  // Key tiles per split of the split-K kernel and the emulator; 0: the plan for the GPU
  // (make_decode_split_plan).
  int tiles_per_split = 0;
  // The INT8 cache's GPU mainloop.
  DecodeMainloop mainloop = DecodeMainloop::automatic;
  // What the GPU's combine of the splits waits for.
  DecodeCombineWait combine = DecodeCombineWait::automatic;
};

// Token counts of each append, in order (one vector of per-sequence counts per append).
// Context chunk i of sequence b: floor(c_b (i+1) / S) - floor(c_b i / S), c_b = L_b - n_b,
// S = append_steps - 1; the last append holds n_b.
std::vector<std::vector<int64_t>> append_chunks(const DecodeShape& shape, int append_steps);

struct PreparedDecode {
  DecodeShape shape;
  std::vector<uint16_t> q;             // FP16 [total_new, hq, d]
  std::vector<uint16_t> k_src, v_src;  // FP16 [sum L_b, hk, d]: the tokens the cache was filled with
  Int8KvCache int8;
  Fp16KvCache fp16;
  RoutingPlan plan;  // for shape.attention_shape() with kDecodeGeometry
  std::vector<std::vector<int64_t>> append_counts;  // the chunks appended, in order
};

// Generates (or reads) Q/K/V for shape.attention_shape(), fills both caches by appending K/V in
// the case's chunks, and builds the plan. `spec.decode` must be set. Errors name spec.where.
PreparedDecode prepare_decode(const CaseSpec& spec);

}  // namespace tilemix
