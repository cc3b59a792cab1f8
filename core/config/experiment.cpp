#include "core/config/experiment.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "core/config/json_reader.hpp"
#include "core/error.hpp"
#include "core/quant_fp8.hpp"
#include "core/sizes.hpp"
#include "core/tiling.hpp"

namespace tilemix {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string> kTopKeys = {"name", "description", "defaults", "cases", "axes", "methods", "timing"};
const std::vector<std::string> kCaseKeys = {"name",       "batch", "seq_len", "lq",    "lk",      "seqlens_q",
                                            "seqlens_k",  "hq",    "hk",      "d",     "causal",  "softmax_scale",
                                            "layout",     "ratio", "seed",    "group", "block_m", "block_n",
                                            "words_file", "mode",  "state",   "accum", "input",   "tolerance",
                                            "kind",       "cache_len", "cache_lens", "new_tokens", "cache",
                                            "append_steps", "tiles_per_split", "mainloop", "combine", "layers",
                                            "vocab",      "compare_with", "smooth_k", "pv"};
const std::vector<std::string> kInputKeys = {
    "kind", "seed", "stddev", "outlier_channels", "outlier_scale", "sink_scale", "local_bias", "k_channel_bias",
    "q",    "k",    "v",      "allow_nonfinite"};
const std::vector<std::string> kToleranceKeys = {"emulator_vs_reference", "gpu_vs_emulator", "gpu_vs_reference"};
const std::vector<std::string> kBoundKeys = {"max_abs", "mean_abs", "rel_l2", "min_cosine"};
// What compare_with may replace: the method, routing and numerics; the shape and inputs stay the
// case's own, so that both outputs come from the same Q, K and V.
const std::vector<std::string> kComparisonKeys = {"method", "layout", "ratio", "group",
                                                  "mode",   "state",  "accum", "smooth_k", "pv"};
const std::vector<std::string> kRoutingKeys = {"layout", "ratio", "group"};
// Numerics keys of the routed kernel alone: a baseline has no quantization pass.
const std::vector<std::string> kTilemixNumericsKeys = {"mode", "smooth_k", "pv"};
const std::vector<std::string> kComparisonMethods = {"tilemix", "flash_fp16", "torch_like"};
const std::vector<std::string> kLengthKeys = {"seq_len",   "lq",        "lk",        "seqlens_q",
                                              "seqlens_k", "cache_len", "cache_lens"};
// Keys of one kind of case only; the other kind rejects them by name.
const std::vector<std::string> kDecodeOnlyKeys = {"cache_len", "cache_lens", "new_tokens", "cache", "append_steps",
                                                  "tiles_per_split", "combine"};
const std::vector<std::string> kPrefillOnlyKeys = {"seq_len", "lq",    "lk",    "seqlens_q", "seqlens_k", "causal",
                                                   "mode",    "state", "accum", "block_m",   "block_n", "smooth_k",
                                                   "pv"};
const std::vector<std::string> kModelOnlyKeys = {"layers", "vocab"};

constexpr int64_t kMaxBatch = int64_t{1} << 20;
constexpr int64_t kMaxHeads = int64_t{1} << 16;
// What a config may expand to: every case keeps its sequence lengths and its merged JSON, so
// these bound the memory and the time of reading one (docs/config.md).
constexpr int64_t kMaxCases = 100000;
constexpr int64_t kMaxConfigSequences = int64_t{1} << 22;  // summed over the expanded cases
constexpr size_t kMaxCaseNameBytes = 1024;
constexpr int kMaxAppendSteps = 1 << 16;
constexpr int kMaxModelLayers = 1024;
constexpr int kMaxModelVocab = 1 << 20;

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string num(double v) { return json(v).dump(); }

struct Context {
  std::string file;
  fs::path base_dir;  // relative file names in the config are resolved against this
  std::string at(const std::string& path) const { return file.empty() ? path : file + ": " + path; }
};

// "$.a.b", or "$.a[\"x.y\"]" when the key is not a plain identifier.
std::string member_path(const std::string& parent, const std::string& key) {
  const bool plain = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
  return plain ? parent + "." + key : parent + "[" + json(key).dump() + "]";
}

// Accepted as an axis or --set key: a case key, or a dotted key inside input/tolerance.
bool known_case_key(const std::string& key) {
  const auto dot = key.find('.');
  if (dot == std::string::npos) return contains(kCaseKeys, key);
  const std::string head = key.substr(0, dot), rest = key.substr(dot + 1);
  if (head == "input") return contains(kInputKeys, rest);
  if (head == "compare_with") return contains(kComparisonKeys, rest);
  if (head != "tolerance") return false;
  const auto dot2 = rest.find('.');
  if (dot2 == std::string::npos) return contains(kToleranceKeys, rest);
  return contains(kToleranceKeys, rest.substr(0, dot2)) && contains(kBoundKeys, rest.substr(dot2 + 1));
}

// ---- Merging defaults, a case and axis values, remembering where each value came from ----

// Dotted key ("hq", "input.kind") -> JSON path of the value that won the merge.
using Origins = std::map<std::string, std::string>;

void erase_origins_below(Origins& origins, const std::string& key) {
  const std::string prefix = key + ".";
  for (auto it = origins.lower_bound(prefix);
       it != origins.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    it = origins.erase(it);
  }
}

void erase_key(json& merged, Origins& origins, const std::string& key) {
  merged.erase(key);
  origins.erase(key);
  erase_origins_below(origins, key);
}

// Sets `node` (at dotted `key`) to `value`; objects merge key by key.
void assign(json& node, Origins& origins, const std::string& key, const json& value, const std::string& path) {
  origins[key] = path;
  if (!value.is_object()) {
    erase_origins_below(origins, key);
    node = value;
    return;
  }
  if (!node.is_object()) {
    erase_origins_below(origins, key);
    node = json::object();
  }
  for (const auto& item : value.items()) {
    assign(node[item.key()], origins, key + "." + item.key(), item.value(), member_path(path, item.key()));
  }
}

// Sequence lengths come in three forms: seq_len (+ batch), lq and lk (+ batch), seqlens_q and
// seqlens_k; decode cases give cache_len (+ batch) or cache_lens. A layer that uses one form
// replaces the lengths of lower layers given in another.
enum class LengthForm { none, equal, pair, varlen, cache_equal, cache_varlen };

LengthForm length_form(const std::string& key) {
  if (key == "seq_len") return LengthForm::equal;
  if (key == "lq" || key == "lk") return LengthForm::pair;
  if (key == "seqlens_q" || key == "seqlens_k") return LengthForm::varlen;
  if (key == "cache_len") return LengthForm::cache_equal;
  if (key == "cache_lens") return LengthForm::cache_varlen;
  return LengthForm::none;
}

void drop_other_length_forms(json& merged, Origins& origins, LengthForm keep) {
  for (const auto& key : kLengthKeys) {
    if (length_form(key) != keep) erase_key(merged, origins, key);
  }
  if (keep == LengthForm::varlen || keep == LengthForm::cache_varlen) erase_key(merged, origins, "batch");
}

void merge_layer(json& merged, Origins& origins, const json& layer, const std::string& layer_path, const Context& ctx) {
  LengthForm form = LengthForm::none;
  std::string form_key;
  for (const auto& item : layer.items()) {
    const LengthForm f = length_form(item.key());
    if (f == LengthForm::none) continue;
    if (form != LengthForm::none && f != form) {
      throw InputError(
          ctx.at(member_path(layer_path, item.key())),
          "cannot be combined with " + form_key +
              " (give seq_len, or lq and lk, or seqlens_q and seqlens_k; decode: cache_len or cache_lens)");
    }
    form = f;
    form_key = item.key();
  }
  if ((form == LengthForm::varlen || form == LengthForm::cache_varlen) && layer.contains("batch")) {
    throw InputError(ctx.at(member_path(layer_path, "batch")),
                     "cannot be combined with " + form_key + " (the batch is the number of lengths given)");
  }
  if (form != LengthForm::none) drop_other_length_forms(merged, origins, form);
  for (const auto& item : layer.items()) {
    assign(merged[item.key()], origins, item.key(), item.value(), member_path(layer_path, item.key()));
  }
}

// One axis value at a possibly dotted key ("ratio", "input.kind").
void apply_axis_value(json& merged, Origins& origins, const std::string& key, const json& value,
                      const std::string& path, const Context& ctx) {
  const LengthForm form = length_form(key);
  if (form != LengthForm::none) drop_other_length_forms(merged, origins, form);
  json* node = &merged;
  std::string dotted;
  size_t begin = 0;
  for (;;) {
    const size_t dot = key.find('.', begin);
    const std::string part = key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    dotted += (dotted.empty() ? "" : ".") + part;
    if (dot == std::string::npos) {
      assign((*node)[part], origins, dotted, value, path);
      return;
    }
    json& child = (*node)[part];
    if (child.is_null()) child = json::object();
    if (!child.is_object()) {
      const auto it = origins.find(dotted);
      json_type_error(ctx.at(it != origins.end() ? it->second : dotted), "object", child);
    }
    node = &child;
    begin = dot + 1;
  }
}

// Points the reader's keys at the paths their merged values came from.
void apply_origins(JsonObjectReader& r, const json& obj, const Origins& origins, const std::string& prefix) {
  for (const auto& item : obj.items()) {
    const auto it = origins.find(prefix + item.key());
    if (it != origins.end()) r.set_key_path(item.key(), it->second);
  }
}

// ---- Reading one merged case ----

std::optional<int> int_in(JsonObjectReader& r, const std::string& key, int64_t lo, int64_t hi) {
  const auto v = r.integer(key);
  if (!v) return std::nullopt;
  if (*v < lo || *v > hi) {
    throw InputError(r.where(key),
                     "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(*v));
  }
  return static_cast<int>(*v);
}

std::optional<double> number_at_least(JsonObjectReader& r, const std::string& key, double lo, bool open) {
  const auto v = r.number(key);
  if (!v) return std::nullopt;
  if (!std::isfinite(*v) || (open ? !(*v > lo) : !(*v >= lo))) {
    throw InputError(r.where(key),
                     std::string("must be a finite number ") + (open ? "> " : ">= ") + num(lo) + ", got " + num(*v));
  }
  return v;
}

void check_length(int64_t v, const std::string& where) {
  if (v < 0) throw InputError(where, "negative sequence length " + std::to_string(v));
  if (v > kMaxSeqLen) {
    throw InputError(
        where, "sequence length " + std::to_string(v) + " is too large (at most " + std::to_string(kMaxSeqLen) + ")");
  }
}

void read_lengths(JsonObjectReader& r, const std::string& case_where, AttentionShape& shape) {
  const auto seq_len = r.integer("seq_len");
  const auto lq = r.integer("lq"), lk = r.integer("lk");
  const auto seqlens_q = r.integer_array("seqlens_q"), seqlens_k = r.integer_array("seqlens_k");
  const auto batch = r.integer("batch");
  std::vector<int64_t> lens_q, lens_k;
  if (seqlens_q || seqlens_k) {
    if (!seqlens_q) throw InputError(r.where("seqlens_q"), "is required with seqlens_k (one length per sequence)");
    if (!seqlens_k) throw InputError(r.where("seqlens_k"), "is required with seqlens_q (one length per sequence)");
    if (batch) {
      throw InputError(r.where("batch"), "cannot be combined with seqlens_q/seqlens_k (the batch is their length)");
    }
    if (seqlens_q->empty()) throw InputError(r.where("seqlens_q"), "needs at least one sequence length");
    if (seqlens_k->size() != seqlens_q->size()) {
      throw InputError(r.where("seqlens_k"), "has " + std::to_string(seqlens_k->size()) +
                                                 " lengths but seqlens_q has " + std::to_string(seqlens_q->size()));
    }
    if (seqlens_q->size() > static_cast<size_t>(kMaxBatch)) {
      throw InputError(r.where("seqlens_q"), "has more than " + std::to_string(kMaxBatch) + " sequences");
    }
    for (size_t i = 0; i < seqlens_q->size(); ++i) {
      check_length((*seqlens_q)[i], r.where("seqlens_q") + "[" + std::to_string(i) + "]");
      check_length((*seqlens_k)[i], r.where("seqlens_k") + "[" + std::to_string(i) + "]");
    }
    lens_q = *seqlens_q;
    lens_k = *seqlens_k;
  } else {
    const int64_t b = batch.value_or(1);
    if (b < 1 || b > kMaxBatch) {
      throw InputError(r.where("batch"), "must be in [1, " + std::to_string(kMaxBatch) + "], got " + std::to_string(b));
    }
    if (seq_len) {
      check_length(*seq_len, r.where("seq_len"));
      lens_q.assign(static_cast<size_t>(b), *seq_len);
      lens_k = lens_q;
    } else if (lq || lk) {
      if (!lq) throw InputError(r.where("lq"), "is required with lk");
      if (!lk) throw InputError(r.where("lk"), "is required with lq");
      check_length(*lq, r.where("lq"));
      check_length(*lk, r.where("lk"));
      lens_q.assign(static_cast<size_t>(b), *lq);
      lens_k.assign(static_cast<size_t>(b), *lk);
    } else {
      throw InputError(case_where,
                       "sequence lengths are required: give seq_len, or lq and lk, or seqlens_q and seqlens_k");
    }
  }
  shape.cu_seqlens_q = prefix_sums(lens_q);
  shape.cu_seqlens_k = prefix_sums(lens_k);
}

std::string resolve_path(const Context& ctx, const std::string& p) {
  fs::path path(p);
  if (path.is_relative() && !ctx.base_dir.empty()) path = ctx.base_dir / path;
  return path.lexically_normal().string();
}

void require_file(const std::string& where, const std::string& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) throw InputError(where, "file not found: " + path);
  if (!fs::is_regular_file(status)) throw InputError(where, "not a regular file: " + path);
}

Tolerance read_bounds(JsonObjectReader& r) {
  Tolerance t;
  t.max_abs = number_at_least(r, "max_abs", 0.0, false);
  t.mean_abs = number_at_least(r, "mean_abs", 0.0, false);
  t.rel_l2 = number_at_least(r, "rel_l2", 0.0, false);
  t.min_cosine = r.number("min_cosine");
  if (t.min_cosine && !(*t.min_cosine >= -1.0 && *t.min_cosine <= 1.0)) {
    throw InputError(r.where("min_cosine"), "must be in [-1, 1], got " + num(*t.min_cosine));
  }
  r.finish();
  return t;
}

template <class Enum>
Enum read_enum(JsonObjectReader& r, const std::string& key, const std::vector<std::pair<std::string, Enum>>& names,
               Enum fallback) {
  std::vector<std::string> allowed;
  for (const auto& n : names) allowed.push_back(n.first);
  const auto s = r.choice(key, allowed);
  if (!s) return fallback;
  for (const auto& n : names) {
    if (n.first == *s) return n.second;
  }
  return fallback;
}

void read_input(JsonObjectReader& r, const json& merged, const Origins& origins, const Context& ctx, int d,
                InputSpec& in) {
  auto ir = r.object("input");
  if (!ir) return;
  apply_origins(*ir, merged.at("input"), origins, "input.");
  in.kind = read_enum<InputKind>(
      *ir, "kind", {{"gaussian", InputKind::gaussian}, {"llm_like", InputKind::llm_like}, {"npy", InputKind::npy}},
      InputKind::gaussian);
  if (const auto seed = ir->integer("seed")) {
    if (*seed < 0) throw InputError(ir->where("seed"), "must be >= 0, got " + std::to_string(*seed));
    in.seed = static_cast<uint64_t>(*seed);
  }
  if (const auto v = number_at_least(*ir, "stddev", 0.0, true)) in.stddev = static_cast<float>(*v);
  if (const auto v = int_in(*ir, "outlier_channels", 0, max_outlier_channels(d))) in.outlier_channels = *v;
  if (const auto v = number_at_least(*ir, "outlier_scale", 0.0, true)) in.outlier_scale = static_cast<float>(*v);
  if (const auto v = number_at_least(*ir, "sink_scale", 0.0, true)) in.sink_scale = static_cast<float>(*v);
  if (const auto v = number_at_least(*ir, "local_bias", 0.0, false)) in.local_bias = static_cast<float>(*v);
  if (const auto v = number_at_least(*ir, "k_channel_bias", 0.0, false)) in.k_channel_bias = static_cast<float>(*v);
  if (const auto v = ir->boolean("allow_nonfinite")) in.allow_nonfinite = *v;
  const std::pair<const char*, std::string*> files[] = {{"q", &in.q_path}, {"k", &in.k_path}, {"v", &in.v_path}};
  for (const auto& [key, dst] : files) {
    const auto p = ir->string(key);
    if (in.kind != InputKind::npy) {
      if (p) throw InputError(ir->where(key), "is only used with input kind npy");
      continue;
    }
    if (!p) {
      throw InputError(ir->where(key), std::string("is required for input kind npy (a .npy file of shape ") +
                                           (std::string(key) == "q" ? "[total_q, hq, d])" : "[total_k, hk, d])"));
    }
    *dst = resolve_path(ctx, *p);
    require_file(ir->where(key), *dst);
  }
  ir->finish();
}

void read_tolerance(JsonObjectReader& r, const json& merged, const Origins& origins, CaseTolerances& tol) {
  auto tr = r.object("tolerance");
  if (!tr) return;
  apply_origins(*tr, merged.at("tolerance"), origins, "tolerance.");
  Tolerance* dst[] = {&tol.emulator_vs_reference, &tol.gpu_vs_emulator, &tol.gpu_vs_reference};
  for (size_t i = 0; i < kToleranceKeys.size(); ++i) {
    const std::string& key = kToleranceKeys[i];
    if (auto br = tr->object(key)) {
      apply_origins(*br, merged.at("tolerance").at(key), origins, "tolerance." + key + ".");
      *dst[i] = read_bounds(*br);
    }
  }
  tr->finish();
}

// A key of another kind of case names itself, at the path where it was written.
void reject_keys(const JsonObjectReader& r, const json& merged, const std::vector<std::string>& keys,
                 const std::string& why) {
  for (const auto& key : keys) {
    if (merged.contains(key)) throw InputError(r.where(key), why);
  }
}

void read_cache_lengths(JsonObjectReader& r, const std::string& case_where, DecodeShape& shape) {
  const auto cache_len = r.integer("cache_len");
  const auto cache_lens = r.integer_array("cache_lens");
  const auto batch = r.integer("batch");
  const auto check_cache = [](int64_t v, const std::string& where) {
    check_length(v, where);
    if (v < 1) {
      throw InputError(where, "must be >= 1 (the cache holds at least the new tokens), got " + std::to_string(v));
    }
  };
  if (cache_lens) {
    if (batch) throw InputError(r.where("batch"), "cannot be combined with cache_lens (the batch is its length)");
    if (cache_lens->empty()) throw InputError(r.where("cache_lens"), "needs at least one cache length");
    if (cache_lens->size() > static_cast<size_t>(kMaxBatch)) {
      throw InputError(r.where("cache_lens"), "has more than " + std::to_string(kMaxBatch) + " sequences");
    }
    for (size_t i = 0; i < cache_lens->size(); ++i) {
      check_cache((*cache_lens)[i], r.where("cache_lens") + "[" + std::to_string(i) + "]");
    }
    shape.cache_len = *cache_lens;
  } else if (cache_len) {
    const int64_t b = batch.value_or(1);
    if (b < 1 || b > kMaxBatch) {
      throw InputError(r.where("batch"), "must be in [1, " + std::to_string(kMaxBatch) + "], got " + std::to_string(b));
    }
    check_cache(*cache_len, r.where("cache_len"));
    shape.cache_len.assign(static_cast<size_t>(b), *cache_len);
  } else {
    throw InputError(case_where,
                     "cache lengths are required for a decode case: give cache_len (+ batch) or cache_lens");
  }

  // new_tokens: one count for every sequence, or one per sequence; 1 when absent.
  const size_t batch_size = shape.cache_len.size();
  shape.new_tokens.assign(batch_size, 1);
  std::vector<std::string> where(batch_size, r.where("new_tokens"));
  if (r.has("new_tokens")) {
    const json& v = r.raw("new_tokens");
    if (v.is_array()) {
      shape.new_tokens = *r.integer_array("new_tokens");
      if (shape.new_tokens.size() != batch_size) {
        throw InputError(r.where("new_tokens"), "has " + std::to_string(shape.new_tokens.size()) +
                                                    " counts but the case has " + std::to_string(batch_size) +
                                                    " sequences");
      }
      for (size_t i = 0; i < batch_size; ++i) where[i] += "[" + std::to_string(i) + "]";
    } else if (v.is_number_integer()) {
      shape.new_tokens.assign(batch_size, *r.integer("new_tokens"));
    } else {
      json_type_error(r.where("new_tokens"), "integer or array of integers", v);
    }
  }
  for (size_t i = 0; i < batch_size; ++i) {
    const int64_t n = shape.new_tokens[i];
    if (n < 1 || n > kMaxDecodeTokens) {
      throw InputError(where[i], "must be in [1, " + std::to_string(kMaxDecodeTokens) + "], got " + std::to_string(n));
    }
    if (n > shape.cache_len[i]) {
      throw InputError(where[i], "is " + std::to_string(n) + " but sequence " + std::to_string(i) + " caches only " +
                                     std::to_string(shape.cache_len[i]) +
                                     " tokens (the new tokens are the last entries of the cache)");
    }
  }
}

CaseSpec read_case(const json& merged, const Origins& origins, const Context& ctx, const std::string& case_path);

// compare_with of a prefill case: its keys replace the case's own, and the case read again with
// them gives the routing and numerics of the run that the case's rows are compared with.
Comparison read_comparison(JsonObjectReader& r, const json& merged, const Origins& origins, const Context& ctx,
                           const std::string& case_path) {
  auto cr = r.object("compare_with");
  const json& keys = merged.at("compare_with");
  apply_origins(*cr, keys, origins, "compare_with.");
  Comparison c;
  c.method = *parse_method(cr->choice("method", kComparisonMethods).value_or("tilemix"));
  c.label = to_string(c.method);
  json base = merged;
  Origins base_origins = origins;
  erase_key(base, base_origins, "compare_with");
  for (const auto& key : kComparisonKeys) {
    if (key == "method" || !cr->has(key)) continue;
    if (c.method != Method::tilemix && contains(kRoutingKeys, key)) {
      throw InputError(cr->where(key), std::string("is a routing key; ") + c.label + " runs without routing");
    }
    if ((c.method == Method::flash_fp16 && contains(kTilemixNumericsKeys, key)) || c.method == Method::torch_like) {
      throw InputError(cr->where(key), "has no meaning for " + c.label);
    }
    const json& value = cr->raw(key);
    assign(base[key], base_origins, key, value, cr->path_of(key));
    c.label += " " + key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
  }
  cr->finish();
  const CaseSpec compared = read_case(base, base_origins, ctx, case_path);
  c.routing = compared.routing;
  c.numerics = compared.numerics;
  // A baseline keeps the case's state and accumulation; it has no quantization pass to smooth.
  if (c.method != Method::tilemix) {
    c.numerics.smooth_k = false;
    c.numerics.pv = PvPrecision::fp16;
  }
  return c;
}

CaseSpec read_case(const json& merged, const Origins& origins, const Context& ctx, const std::string& case_path) {
  CaseSpec spec;
  spec.where = ctx.at(case_path);
  spec.json = merged;
  JsonObjectReader r(merged, ctx.file, case_path);
  apply_origins(r, merged, origins, "");

  spec.name = r.string("name").value_or("");
  std::vector<std::string> kinds;
  for (CaseKind k : all_case_kinds()) kinds.push_back(to_string(k));
  const CaseKind kind = *parse_case_kind(r.choice("kind", kinds).value_or(to_string(CaseKind::prefill)));
  const bool decode = kind == CaseKind::decode;
  if (decode) {
    reject_keys(r, merged, kPrefillOnlyKeys, "is a prefill key; this case has \"kind\": \"decode\"");
  } else {
    reject_keys(r, merged, kDecodeOnlyKeys, "is only used in decode cases (\"kind\": \"decode\")");
  }
  if (kind != CaseKind::model) {
    reject_keys(r, merged, kModelOnlyKeys, "is only used in model cases (\"kind\": \"model\")");
  }
  if (kind != CaseKind::prefill) {
    reject_keys(r, merged, {"compare_with"}, "is only used in prefill cases (the model sweep compares with its "
                                             "reference model)");
  }
  AttentionShape& shape = spec.shape;
  DecodeShape decode_shape;
  if (decode) {
    read_cache_lengths(r, spec.where, decode_shape);
  } else {
    read_lengths(r, spec.where, shape);
  }
  shape.hq = int_in(r, "hq", 1, kMaxHeads).value_or(8);
  shape.hk = int_in(r, "hk", 1, kMaxHeads).value_or(2);
  shape.d = int_in(r, "d", 1, kMaxHeads).value_or(128);
  if (!decode) shape.causal = r.boolean("causal").value_or(false);
  if (const auto scale = number_at_least(r, "softmax_scale", 0.0, true)) {
    shape.softmax_scale = static_cast<float>(*scale);
  }
  if (decode) {
    decode_shape.hq = shape.hq;
    decode_shape.hk = shape.hk;
    decode_shape.d = shape.d;
    decode_shape.softmax_scale = shape.softmax_scale;
    validate_decode(decode_shape, spec.where);
    shape = decode_shape.attention_shape();
  } else {
    validate(shape, spec.where);
  }

  RoutingRequest& routing = spec.routing;
  std::vector<std::string> layouts;
  for (LayoutKind k : all_layouts()) layouts.push_back(to_string(k));
  const std::string layout_name = r.choice("layout", layouts).value_or("zero");
  routing.layout = *parse_layout(layout_name);
  // Decode routes one 16-row tile of new tokens, and the model's layers make their own Q and K.
  if (routes_from_data(routing.layout) && kind != CaseKind::prefill) {
    throw InputError(r.where("layout"), layout_name + " routes prefill cases from their Q and K; a " +
                                            to_string(kind) + " case takes a static layout or file");
  }
  const auto ratio = r.number("ratio");
  if (ratio && !(*ratio >= 0.0 && *ratio <= 1.0)) {
    throw InputError(r.where("ratio"), "must be in [0, 1] (the requested INT8 coverage), got " + num(*ratio));
  }
  // zero and one fix the coverage; file takes it from the words.
  if (routing.layout == LayoutKind::zero) {
    routing.ratio = 0.0;
  } else if (routing.layout == LayoutKind::one) {
    routing.ratio = 1.0;
  } else if (ratio) {
    routing.ratio = *ratio;
  } else if (routing.layout != LayoutKind::file) {
    throw InputError(spec.where, "ratio is required for layout " + layout_name + " (the INT8 coverage in [0, 1])");
  }
  if (const auto seed = r.integer("seed")) {
    if (*seed < 0) throw InputError(r.where("seed"), "must be >= 0, got " + std::to_string(*seed));
    routing.seed = static_cast<uint64_t>(*seed);
  }
  if (r.has("group")) {
    const json& g = r.raw("group");
    const bool is_auto = g.is_string() && g.get<std::string>() == "auto";
    if (!is_auto) {
      if (!g.is_number_integer() || g.get<int64_t>() < 1 || g.get<int64_t>() > kMaxSeqLen) {
        json_type_error(r.where("group"), "\"auto\" or a positive integer", g);
      }
      routing.group = static_cast<int>(g.get<int64_t>());
    }
  }
  if (decode) {
    routing.geometry = kDecodeGeometry;
  } else {
    routing.geometry.block_m = int_in(r, "block_m", 1, 4096).value_or(routing.geometry.block_m);
    routing.geometry.block_n = int_in(r, "block_n", 1, 4096).value_or(routing.geometry.block_n);
    validate_geometry(routing.geometry, spec.where.c_str());
  }
  std::set<std::pair<int64_t, int64_t>> geometries;
  for (int b = 0; b < shape.batch(); ++b) geometries.emplace(shape.seqlen_q(b), shape.seqlen_k(b));
  const std::string group_where = r.where("group");
  for (const auto& [lq, lk] : geometries) {
    make_tiling(lq, lk, shape.causal, routing.geometry, routing.group, group_where.c_str());
  }
  const auto words_file = r.string("words_file");
  if (routing.layout == LayoutKind::file) {
    if (!words_file) {
      throw InputError(r.where("words_file"),
                       "is required for layout file (JSON {\"words\": [[hex, ...] per KV head]} "
                       "or a uint64 .npy)");
    }
    routing.words_file = resolve_path(ctx, *words_file);
    require_file(r.where("words_file"), routing.words_file);
  } else if (words_file) {
    throw InputError(r.where("words_file"), "is only used with layout file, not " + layout_name);
  }

  if (decode) {
    DecodeCaseSpec& dc = spec.decode.emplace();
    dc.shape = decode_shape;
    dc.cache = read_enum<CacheKind>(r, "cache", {{"int8", CacheKind::int8}, {"fp16", CacheKind::fp16}}, dc.cache);
    dc.append_steps = int_in(r, "append_steps", 1, kMaxAppendSteps).value_or(dc.append_steps);
    dc.tiles_per_split = int_in(r, "tiles_per_split", 0, 1 << 24).value_or(0);  // 0: the GPU plan
    dc.mainloop = read_enum<DecodeMainloop>(
        r, "mainloop",
        {{"auto", DecodeMainloop::automatic}, {"mma_sync", DecodeMainloop::mma_sync}, {"wgmma", DecodeMainloop::wgmma}},
        dc.mainloop);
    dc.combine = read_enum<DecodeCombineWait>(r, "combine",
                                              {{"auto", DecodeCombineWait::automatic},
                                               {"grid", DecodeCombineWait::grid},
                                               {"sequence", DecodeCombineWait::sequence}},
                                              dc.combine);
    if (dc.cache == CacheKind::fp16 && routing.layout != LayoutKind::zero) {
      throw InputError(r.where("layout"), "must be zero with cache fp16 (the FP16 cache has no INT8 score path), got " +
                                              layout_name);
    }
  } else {
    Numerics& nu = spec.numerics;
    nu.mode = read_enum<QuantMode>(
        r, "mode", {{"quantize_once", QuantMode::quantize_once}, {"on_the_fly", QuantMode::on_the_fly}}, nu.mode);
    nu.state = read_enum<StatePrecision>(r, "state", {{"fp32", StatePrecision::fp32}, {"fp16", StatePrecision::fp16}},
                                         nu.state);
    nu.accum = read_enum<AccumPrecision>(r, "accum", {{"fp32", AccumPrecision::fp32}, {"fp16", AccumPrecision::fp16}},
                                         nu.accum);
    nu.smooth_k = r.boolean("smooth_k").value_or(nu.smooth_k);
    nu.pv = read_enum<PvPrecision>(
        r, "pv", {{"fp16", PvPrecision::fp16}, {"fp8", PvPrecision::fp8}, {"routed", PvPrecision::routed}}, nu.pv);
    if (nu.pv != PvPrecision::fp16 && nu.accum != AccumPrecision::fp32) {
      throw InputError(r.where("pv"), std::string("is ") + to_string(nu.pv) +
                                          ": FP8 P V accumulates in FP32, so it needs \"accum\": \"fp32\"");
    }
    if (nu.pv != PvPrecision::fp16 && routing.geometry.block_n != kBlockV) {
      throw InputError(r.where("pv"), std::string("is ") + to_string(nu.pv) + ": FP8 P V takes key tiles of one V " +
                                          "scale block, block_n " + std::to_string(kBlockV) + " (block_n is " +
                                          std::to_string(routing.geometry.block_n) + ")");
    }
    spec.prefill_mainloop = read_enum<PrefillMainloop>(r, "mainloop",
                                                       {{"auto", PrefillMainloop::automatic},
                                                        {"wgmma", PrefillMainloop::wgmma},
                                                        {"warp_specialized", PrefillMainloop::warp_specialized}},
                                                       spec.prefill_mainloop);
    if (nu.pv != PvPrecision::fp16 && spec.prefill_mainloop == PrefillMainloop::wgmma) {
      throw InputError(r.where("mainloop"), std::string("is wgmma: FP8 P V (pv ") + to_string(nu.pv) +
                                                ") runs on the warp_specialized mainloop (or auto)");
    }
  }
  if (kind == CaseKind::model) {
    ModelCaseSpec& mc = spec.model.emplace();
    mc.layers = int_in(r, "layers", 1, kMaxModelLayers).value_or(mc.layers);
    mc.vocab = int_in(r, "vocab", 1, kMaxModelVocab).value_or(mc.vocab);
    checked_product(r.where("vocab"), "the logits [tokens, vocab] in floats",
                    {{shape.total_q(), "tokens"}, {mc.vocab, "vocab"}, {4, "bytes"}});
    for (int b = 0; b < shape.batch(); ++b) {
      if (shape.seqlen_q(b) != shape.seqlen_k(b)) {
        throw InputError(spec.where, "a model case is self-attention: Lq must equal Lk (sequence " +
                                         std::to_string(b) + " has " + std::to_string(shape.seqlen_q(b)) + " and " +
                                         std::to_string(shape.seqlen_k(b)) + ")");
      }
    }
  }

  spec.input.seed = routing.seed;
  read_input(r, merged, origins, ctx, shape.d, spec.input);
  // The random model draws its own N(0, 1) input from input.seed; nothing else would be used.
  if (spec.model && (spec.input.kind != InputKind::gaussian || spec.input.stddev != 1.0f)) {
    throw InputError(r.where("input"), "a model case draws its own N(0, 1) input from input.seed: give kind "
                                       "gaussian and stddev 1 (or leave them out)");
  }
  read_tolerance(r, merged, origins, spec.tolerance);
  if (r.has("compare_with")) spec.compare_with = read_comparison(r, merged, origins, ctx, case_path);
  r.finish();
  return spec;
}

// ---- The whole file ----

// A listed method must run the case: a method of another kind would time some other kernel
// under its name.
void check_methods_run(const std::vector<Method>& methods, const std::vector<std::string>& wheres,
                       const CaseSpec& spec, const std::string& case_path) {
  const CaseKind kind = case_kind(spec);
  for (size_t i = 0; i < methods.size(); ++i) {
    if (runs(methods[i], kind)) continue;
    std::vector<std::string> kinds;
    for (CaseKind k : case_kinds(methods[i])) kinds.push_back(to_string(k));
    std::string kinds_text = kinds.back();
    if (kinds.size() > 1) {
      kinds.pop_back();
      kinds_text = join(kinds) + " and " + kinds_text;
    }
    throw InputError(wheres[i], std::string("method '") + to_string(methods[i]) + "' runs " + kinds_text +
                                    " cases only; case '" + spec.name + "' (" + case_path + ") is a " +
                                    to_string(kind) + " case");
  }
}

struct Axis {
  std::string key;
  std::string path;  // "$.axes.ratio" or "--set ratio"
  std::vector<json> values;
  bool from_cli = false;
};

std::string axis_value_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// Whether `s` is UTF-8 as JSON strings must be (nlohmann's own check: a dump of a string that is
// not would throw where a message or a result file shows it).
bool valid_utf8(const std::string& s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

// "key=v1,v2": numbers and booleans as JSON, anything else as a string.
Axis parse_override(const std::string& text) {
  if (!valid_utf8(text)) throw InputError("--set", "is not UTF-8 text");
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError("--set " + text, "expected key=value[,value...], e.g. --set seq_len=1024,4096");
  }
  Axis axis;
  axis.key = text.substr(0, eq);
  axis.path = "--set " + axis.key;
  axis.from_cli = true;
  if (!known_case_key(axis.key)) {
    throw InputError(axis.path, "unknown case key '" + axis.key + "' (expected one of: " + join(kCaseKeys) +
                                    ", or input.<key>, tolerance.<which>.<bound>)");
  }
  const std::string values = text.substr(eq + 1);
  size_t begin = 0;
  for (;;) {
    const size_t comma = values.find(',', begin);
    const std::string token = values.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    if (token.empty()) throw InputError(axis.path, "empty value in '" + text + "'");
    const json parsed = json::parse(token, nullptr, false);
    axis.values.push_back(parsed.is_number() || parsed.is_boolean() ? parsed : json(token));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return axis;
}

ExperimentConfig parse_impl(json j, const std::vector<std::string>& axis_order, const std::string& path,
                            const std::vector<std::string>& overrides) {
  Context ctx{path, fs::path(path).parent_path()};
  ExperimentConfig cfg;
  cfg.path = path;
  if (!j.is_object()) json_type_error(ctx.at("$"), "object", j);

  std::vector<Axis> axes;
  if (j.contains("axes")) {
    const json& a = j.at("axes");
    if (!a.is_object()) json_type_error(ctx.at("$.axes"), "object of arrays", a);
    for (const auto& key : axis_order) {
      Axis axis;
      axis.key = key;
      axis.path = member_path("$.axes", key);
      const json& values = a.at(key);
      if (!known_case_key(key)) {
        throw InputError(ctx.at(axis.path), "unknown case key '" + key + "' (expected one of: " + join(kCaseKeys) +
                                                ", or input.<key>, tolerance.<which>.<bound>)");
      }
      if (!values.is_array() || values.empty()) json_type_error(ctx.at(axis.path), "non-empty array", values);
      axis.values.assign(values.begin(), values.end());
      axes.push_back(std::move(axis));
    }
  }
  for (const auto& text : overrides) {
    Axis axis = parse_override(text);
    if (!j.contains("axes")) j["axes"] = json::object();
    j["axes"][axis.key] = axis.values;
    const auto same = std::find_if(axes.begin(), axes.end(), [&](const Axis& a) { return a.key == axis.key; });
    if (same != axes.end()) {
      *same = std::move(axis);
    } else {
      axes.push_back(std::move(axis));
    }
  }
  cfg.json = j;

  JsonObjectReader r(cfg.json, path, "$");
  for (const auto& key : kTopKeys) r.has(key);
  const std::string stem = fs::path(path).stem().string();
  cfg.name = r.string("name").value_or(stem.empty() ? "config" : stem);
  cfg.description = r.string("description").value_or("");
  json defaults = json::object();
  if (r.has("defaults")) {
    defaults = r.raw("defaults");
    if (!defaults.is_object()) json_type_error(r.where("defaults"), "object", defaults);
  }
  std::vector<std::pair<json, std::string>> case_layers;  // (case object, its path)
  if (r.has("cases")) {
    const json& cases = r.raw("cases");
    if (!cases.is_array() || cases.empty()) json_type_error(r.where("cases"), "non-empty array of objects", cases);
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::string case_path = "$.cases[" + std::to_string(i) + "]";
      if (!cases[i].is_object()) json_type_error(ctx.at(case_path), "object", cases[i]);
      case_layers.emplace_back(cases[i], case_path);
    }
  } else {
    case_layers.emplace_back(json::object(), "$.defaults");
  }
  if (r.has("axes")) r.raw("axes");  // read above, in file order
  std::vector<std::string> method_wheres;  // "$.methods[i]" of cfg.methods[i]
  if (r.has("methods")) {
    const json& methods = r.raw("methods");
    if (!methods.is_array()) json_type_error(r.where("methods"), "array of method names", methods);
    std::vector<std::string> names;
    for (Method m : all_methods()) names.push_back(to_string(m));
    for (size_t i = 0; i < methods.size(); ++i) {
      const std::string where = r.where("methods") + "[" + std::to_string(i) + "]";
      if (!methods[i].is_string()) json_type_error(where, "string", methods[i]);
      const std::string name = methods[i].get<std::string>();
      const std::optional<Method> m = parse_method(name);
      if (!m) throw InputError(where, "unknown method '" + name + "' (expected one of: " + join(names) + ")");
      if (std::find(cfg.methods.begin(), cfg.methods.end(), *m) != cfg.methods.end()) {
        throw InputError(where, "method '" + name + "' is listed twice");
      }
      cfg.methods.push_back(*m);
      method_wheres.push_back(where);
    }
  }
  if (auto tr = r.object("timing")) {
    TimingSpec& t = cfg.timing;
    t.warmup = int_in(*tr, "warmup", 0, 1000000).value_or(t.warmup);
    t.warmup_seconds = number_at_least(*tr, "warmup_seconds", 0.0, true).value_or(t.warmup_seconds);
    t.min_reps = int_in(*tr, "min_reps", 1, 1000000).value_or(t.min_reps);
    t.max_reps = int_in(*tr, "max_reps", 1, 1000000).value_or(t.max_reps);
    if (t.max_reps < t.min_reps) {
      throw InputError(tr->where("max_reps"),
                       "must be >= min_reps (" + std::to_string(t.min_reps) + "), got " + std::to_string(t.max_reps));
    }
    t.max_seconds = number_at_least(*tr, "max_seconds", 0.0, true).value_or(t.max_seconds);
    t.noise = number_at_least(*tr, "noise", 0.0, false).value_or(t.noise);
    t.flush_l2 = tr->boolean("flush_l2").value_or(t.flush_l2);
    tr->finish();
  }
  r.finish();

  // Every case object times every combination of axis values, each factor named in the error.
  std::vector<SizeFactor> factors{{static_cast<int64_t>(case_layers.size()), "cases"}};
  for (const auto& axis : axes) factors.emplace_back(static_cast<int64_t>(axis.values.size()), axis.path);
  const int64_t case_count =
      checked_product(ctx.at(axes.empty() ? "$.cases" : "$.axes"), "the number of cases", factors, kMaxCases);
  const int64_t combos = case_count / static_cast<int64_t>(case_layers.size());

  std::map<std::string, std::string> names;  // case name -> where it was defined
  int64_t sequences = 0;                     // of the cases read so far
  for (size_t c = 0; c < case_layers.size(); ++c) {
    const auto& [layer, case_path] = case_layers[c];
    // Defaults and the case merged once; lengths in the forms that an axis replaces are dropped
    // here rather than copied into every combination.
    json base = json::object();
    Origins base_origins;
    merge_layer(base, base_origins, defaults, "$.defaults", ctx);
    merge_layer(base, base_origins, layer, case_path, ctx);
    for (const Axis& axis : axes) {
      const LengthForm form = length_form(axis.key);
      if (form != LengthForm::none) drop_other_length_forms(base, base_origins, form);
    }
    std::vector<size_t> pick(axes.size(), 0);
    for (int64_t n = 0; n < combos; ++n) {
      json merged = base;
      Origins origins = base_origins;
      std::string suffix;
      for (size_t a = 0; a < axes.size(); ++a) {
        const Axis& axis = axes[a];
        const json& value = axis.values[pick[a]];
        const std::string value_path = axis.from_cli ? axis.path : axis.path + "[" + std::to_string(pick[a]) + "]";
        apply_axis_value(merged, origins, axis.key, value, value_path, ctx);
        suffix += "/" + axis.key + "=" + axis_value_text(value);
      }
      CaseSpec spec = read_case(merged, origins, ctx, case_path);
      spec.name = (spec.name.empty() ? cfg.name + "-" + std::to_string(c) : spec.name) + suffix;
      if (spec.name.size() > kMaxCaseNameBytes) {
        throw InputError(spec.where, "case name '" + spec.name.substr(0, 60) + "...' is " +
                                         std::to_string(spec.name.size()) + " bytes long, at most " +
                                         std::to_string(kMaxCaseNameBytes));
      }
      sequences = checked_sum(spec.where, "the number of sequences of the cases up to this one",
                              {sequences, spec.shape.batch()}, kMaxConfigSequences);
      const auto [it, fresh] = names.emplace(spec.name, spec.where);
      if (!fresh) {
        throw InputError(spec.where, "case name '" + spec.name + "' is also used by " + it->second +
                                         " (names must be unique: they name result rows and dump files)");
      }
      check_methods_run(cfg.methods, method_wheres, spec, case_path);
      cfg.cases.push_back(std::move(spec));
      // Odometer over the axes: the last axis varies fastest.
      for (size_t a = axes.size(); a-- > 0;) {
        if (++pick[a] < axes[a].values.size()) break;
        pick[a] = 0;
      }
    }
  }
  return cfg;
}

std::vector<std::string> axis_keys(const json& j) {
  std::vector<std::string> keys;
  if (j.is_object() && j.contains("axes") && j.at("axes").is_object()) {
    for (const auto& item : j.at("axes").items()) keys.push_back(item.key());
  }
  return keys;
}

}  // namespace

CaseKind case_kind(const CaseSpec& spec) {
  if (spec.decode) return CaseKind::decode;
  return spec.model ? CaseKind::model : CaseKind::prefill;
}

std::vector<Method> methods_to_run(const ExperimentConfig& config, CaseKind kind) {
  return config.methods.empty() ? default_methods(kind) : config.methods;
}

ExperimentConfig parse_config(const nlohmann::json& j, const std::string& path,
                              const std::vector<std::string>& overrides) {
  return parse_impl(j, axis_keys(j), path, overrides);
}

ExperimentConfig parse_config(const nlohmann::ordered_json& j, const std::string& path,
                              const std::vector<std::string>& overrides) {
  std::vector<std::string> order;
  if (j.is_object() && j.contains("axes") && j.at("axes").is_object()) {
    for (const auto& item : j.at("axes").items()) order.push_back(item.key());
  }
  return parse_impl(nlohmann::json(j), order, path, overrides);
}

ExperimentConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  return parse_config(read_ordered_json_file(path), path, overrides);
}

}  // namespace tilemix
