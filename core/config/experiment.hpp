#pragma once
// JSON experiment configs shared by tilemix-check and tilemix-bench.
//
// {
//   "name": "ci", "description": "...",
//   "defaults": { <case keys> },           // applied to every case
//   "cases": [ { <case keys> }, ... ],     // optional; one empty case when absent
//   "axes": { "<case key>": [v, ...] },    // optional cartesian product applied to every case
//   "methods": ["tilemix", "flash_fp16"],  // bench only (core/config/method.hpp)
//   "timing": { "warmup": 3, ... }         // bench only
// }
// Case keys: name, batch, seq_len | lq, lk | seqlens_q, seqlens_k, hq, hk, d, causal,
// softmax_scale, layout, ratio, seed, group ("auto" | int), block_m, block_n, words_file, mode,
// state, accum, smooth_k (key smoothing, Numerics), mainloop (auto | wgmma | warp_specialized: the GPU
// mainloop at d = 128 with fp32 accumulation, PrefillMainloop), input {kind, seed, stddev,
// outlier_channels, outlier_scale, sink_scale, local_bias, k_channel_bias, q, k, v, allow_nonfinite},
// tolerance {emulator_vs_reference, gpu_vs_emulator, gpu_vs_reference: {max_abs, mean_abs, rel_l2,
// min_cosine}}, compare_with {method (tilemix | flash_fp16 | torch_like), layout, ratio, group,
// mode, state, accum, smooth_k} (prefill, tilemix-bench:
// each row's deviation from that run on the case's own inputs, Comparison).
// Decode cases ("kind": "decode"; default "prefill") take cache_len (+ batch) | cache_lens,
// new_tokens (int or array), cache ("int8" | "fp16"), append_steps, tiles_per_split (key tiles per
// split instead of the GPU's split plan; 0, the default, keeps the plan), mainloop (auto |
// mma_sync | wgmma: the INT8 cache's GPU kernel), combine (auto | grid | sequence: what the GPU's
// combine of the splits waits for, DecodeCombineWait), and the shared keys name, hq,
// hk, d, softmax_scale, layout, ratio, seed, group, words_file, input, tolerance; the other
// prefill keys are errors there, as decode keys are in a prefill case.
// Model cases ("kind": "model", tilemix-bench only) are prefill cases of self-attention (Lq = Lk)
// that run the multi-layer random model (reference/random_model.hpp) with the case's attention:
// layers (default 1) and vocab (default 1000) besides the prefill keys; their input is the
// model's own N(0, 1) draw from input.seed (other input kinds and stddev are refused).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/choices/prefill.hpp"
#include "core/config/method.hpp"
#include "core/decode/decode_case.hpp"
#include "core/inputs/inputs.hpp"
#include "core/metrics.hpp"
#include "core/problem.hpp"
#include "core/routing/plan.hpp"

namespace tilemix {

struct CaseTolerances {
  Tolerance emulator_vs_reference;
  Tolerance gpu_vs_emulator;
  Tolerance gpu_vs_reference;
};

// What a prefill bench row's output is compared with ("compare_with"): a baseline method, or the
// routed kernel with some of the case's routing and numerics keys replaced, on the case's own
// inputs (the paper's deviation tables compare runs with each other, not with the exact
// reference).
struct Comparison {
  Method method = Method::tilemix;  // tilemix, flash_fp16 or torch_like
  RoutingRequest routing;           // tilemix: the case's routing with compare_with's keys
  Numerics numerics;                // the case's numerics with compare_with's keys
  std::string label;                // "torch_like", "tilemix layout=zero accum=fp32"
};

struct ModelCaseSpec {
  int layers = 1;
  int vocab = 1000;
};

struct CaseSpec {
  std::string name;
  std::string where;  // "file: $.cases[3]" for later errors
  AttentionShape shape;
  RoutingRequest routing;
  Numerics numerics;
  InputSpec input;
  CaseTolerances tolerance;
  // Set for decode cases; `shape` is then decode->shape.attention_shape() and `routing` uses
  // kDecodeGeometry.
  std::optional<DecodeCaseSpec> decode;
  std::optional<ModelCaseSpec> model;  // set for model cases
  // Prefill and model cases: the GPU mainloop at d = 128 with fp32 accumulation ("mainloop").
  PrefillMainloop prefill_mainloop = PrefillMainloop::automatic;
  std::optional<Comparison> compare_with;  // prefill cases
  nlohmann::json json;  // the merged case as read, saved with results
};

CaseKind case_kind(const CaseSpec& spec);

struct TimingSpec {
  int warmup = 3;
  double warmup_seconds = 0.02;  // warm-up lasts at least this long as well
  int min_reps = 10;
  int max_reps = 200;
  double max_seconds = 2.0;   // per row
  double noise = 0.01;        // stop once the relative std of the median is below this
  bool flush_l2 = true;  // overwrite a buffer larger than L2 before each repetition (cold caches)
};

struct ExperimentConfig {
  std::string path;
  std::string name;
  std::string description;
  std::vector<CaseSpec> cases;
  // As listed: each runs every case of the config (checked when it is read). Empty when the config
  // lists none; methods_to_run then gives the defaults.
  std::vector<Method> methods;
  TimingSpec timing;
  nlohmann::json json;  // the file as read (after --set overrides)
};

// Loads and validates a config. `overrides` are "key=v1,v2" strings that replace or add axes
// (tilemix-bench --set). Throws InputError naming the file and JSON path.
ExperimentConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {});
ExperimentConfig parse_config(const nlohmann::json& j, const std::string& path,
                              const std::vector<std::string>& overrides = {});
// Same, with axes expanded in the order written (a plain nlohmann::json sorts its keys).
ExperimentConfig parse_config(const nlohmann::ordered_json& j, const std::string& path,
                              const std::vector<std::string>& overrides = {});

// The methods to run on the config's cases of `kind`: those listed, or the kind's defaults.
std::vector<Method> methods_to_run(const ExperimentConfig& config, CaseKind kind);

}  // namespace tilemix
