#pragma once
// Reading one merged case of a config (core/config/merge.hpp) into a CaseSpec: read_case picks the
// reader of the case's kind (case_readers.cpp), which reads the parts the kinds share with the
// helpers below (shape: case_shape.cpp; routing: case_routing.cpp; numbers, files, input and
// tolerance: case_fields.cpp). Every error names the JSON path the value was written at. Internal to
// core/config.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config/experiment.hpp"
#include "core/config/json_reader.hpp"
#include "core/config/merge.hpp"
#include "core/enum_names.hpp"

namespace tilemix::config_reading {

// ---- case_readers.cpp ----

// Reads the case merged at `case_path` ("$.cases[3]").
CaseSpec read_case(const nlohmann::json& merged, const Origins& origins, const Context& ctx,
                   const std::string& case_path);

// Throws InputError(where) unless `key` names a case key, or a dotted key inside input,
// compare_with or tolerance (axes and --set).
void require_case_key(const std::string& key, const std::string& where);

// ---- case_fields.cpp ----

std::string num(double v);  // a number as JSON writes it, for messages

std::optional<int> int_in(JsonObjectReader& r, const std::string& key, int64_t lo, int64_t hi);
// A finite number > lo (`open`) or >= lo.
std::optional<double> number_at_least(JsonObjectReader& r, const std::string& key, double lo, bool open);

// "seed": an integer >= 0.
std::optional<uint64_t> read_seed(JsonObjectReader& r);

// The value named at `key`, one of `table`'s names (an error lists them), or `fallback`.
template <class Enum, size_t N>
Enum read_enum(JsonObjectReader& r, const std::string& key, const EnumName<Enum> (&table)[N], Enum fallback) {
  const auto name = r.choice(key, enum_names(table));
  return name ? *parse_enum(table, *name) : fallback;
}

// A file named in the config: relative names are resolved against the config's folder.
std::string resolve_path(const Context& ctx, const std::string& p);
// Throws InputError(where) unless `path` is a regular file.
void require_file(const std::string& where, const std::string& path);

// Whether `key` names a key inside input ("kind") or tolerance ("gpu_vs_reference",
// "gpu_vs_reference.max_abs"), as an axis or --set names it after "input." or "tolerance.".
bool known_input_key(const std::string& key);
bool known_tolerance_key(const std::string& key);

// "input" and "tolerance", where the case has them; `d` bounds input.outlier_channels.
void read_input(JsonObjectReader& r, const nlohmann::json& merged, const Origins& origins, const Context& ctx, int d,
                InputSpec& in);
void read_tolerance(JsonObjectReader& r, const nlohmann::json& merged, const Origins& origins, CaseTolerances& tol);

// ---- case_shape.cpp ----

// Sequence lengths of a prefill or model case: seq_len (+ batch), lq and lk (+ batch), or
// seqlens_q and seqlens_k. `case_where` names the case when none is given.
void read_lengths(JsonObjectReader& r, const std::string& case_where, AttentionShape& shape);
// Cache lengths (cache_len (+ batch) or cache_lens) and new_tokens of a decode case.
void read_cache_lengths(JsonObjectReader& r, const std::string& case_where, DecodeShape& shape);
// hq, hk, d, causal (with `causal_key`: a decode case has none) and softmax_scale.
void read_heads(JsonObjectReader& r, bool causal_key, AttentionShape& shape);

// ---- case_routing.cpp ----

// layout, ratio, seed, group, block_m and block_n (prefill and model), words_file, for a case of
// `kind` of the validated `shape`.
RoutingRequest read_routing(JsonObjectReader& r, const Context& ctx, CaseKind kind, const AttentionShape& shape,
                            const std::string& case_where);

}  // namespace tilemix::config_reading
