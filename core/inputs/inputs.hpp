#pragma once
// Input generators: seeded gaussian, seeded llm_like, and .npy files (SPEC 2, issue 2).
#include <cstdint>
#include <string>
#include <vector>

#include "core/enum_names.hpp"
#include "core/problem.hpp"

namespace tilemix {

enum class InputKind { gaussian, llm_like, npy };
inline constexpr EnumName<InputKind> kInputKindNames[] = {
    {InputKind::gaussian, "gaussian"}, {InputKind::llm_like, "llm_like"}, {InputKind::npy, "npy"}};
inline const char* to_string(InputKind k) { return enum_name(kInputKindNames, k); }

struct InputSpec {
  InputKind kind = InputKind::gaussian;
  uint64_t seed = 0;
  float stddev = 1.0f;  // of every gaussian draw
  // llm_like: a few K channels scaled up, a large-norm sink key at position 0 of every sequence,
  // and a shared low-frequency positional component so nearby keys score higher.
  int outlier_channels = 4;
  float outlier_scale = 8.0f;
  float sink_scale = 6.0f;
  float local_bias = 0.5f;
  // llm_like: per-channel key offsets shared by every token of a KV head, in units of stddev
  // (0: none; inputs.cpp says what they model).
  float k_channel_bias = 0.0f;
  // npy: FP16 or FP32, C order, shapes [total_q, hq, d] / [total_k, hk, d].
  std::string q_path, k_path, v_path;
  bool allow_nonfinite = false;  // NaN/Inf in inputs are an error unless allowed
};

// FP16 bits, Q [total_q, hq, d], K/V [total_k, hk, d].
struct AttentionInputs {
  std::vector<uint16_t> q, k, v;
};

// Generates or reads the inputs for `shape`. Errors name `where` (e.g. "$.cases[0].input") or
// the file at fault.
AttentionInputs make_inputs(const AttentionShape& shape, const InputSpec& spec, const std::string& where = "input");

// llm_like keeps a few channel pairs for its positional component; outliers use the others.
int max_outlier_channels(int d);

// Throws InputError naming `what` (e.g. the file) if any element is NaN/Inf.
void check_finite(const std::vector<uint16_t>& x, const std::string& what);

}  // namespace tilemix
