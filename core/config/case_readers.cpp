#include "core/config/case_reading.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/quant_fp8.hpp"
#include "core/sizes.hpp"

namespace tilemix::config_reading {
namespace {

using nlohmann::json;

const std::vector<std::string> kCaseKeys = {"name",       "batch", "seq_len", "lq",    "lk",      "seqlens_q",
                                            "seqlens_k",  "hq",    "hk",      "d",     "causal",  "softmax_scale",
                                            "layout",     "ratio", "seed",    "group", "block_m", "block_n",
                                            "words_file", "mode",  "state",   "accum", "input",   "tolerance",
                                            "kind",       "cache_len", "cache_lens", "new_tokens", "cache",
                                            "append_steps", "tiles_per_split", "mainloop", "combine", "layers",
                                            "vocab",      "compare_with", "smooth_k", "pv"};
// What compare_with may replace: the method, routing and numerics; the shape and inputs stay the
// case's own, so that both outputs come from the same Q, K and V.
const std::vector<std::string> kComparisonKeys = {"method", "layout", "ratio", "group",
                                                  "mode",   "state",  "accum", "smooth_k", "pv"};
const std::vector<std::string> kRoutingKeys = {"layout", "ratio", "group"};
// Numerics keys of the routed kernel alone: a baseline has no quantization pass.
const std::vector<std::string> kTilemixNumericsKeys = {"mode", "smooth_k", "pv"};
const Method kComparisonMethods[] = {Method::tilemix, Method::flash_fp16, Method::torch_like};
// Keys of one kind of case only; the other kind rejects them by name.
const std::vector<std::string> kDecodeOnlyKeys = {"cache_len", "cache_lens", "new_tokens", "cache", "append_steps",
                                                  "tiles_per_split", "combine"};
const std::vector<std::string> kPrefillOnlyKeys = {"seq_len", "lq",    "lk",    "seqlens_q", "seqlens_k", "causal",
                                                   "mode",    "state", "accum", "block_m",   "block_n", "smooth_k",
                                                   "pv"};
const std::vector<std::string> kModelOnlyKeys = {"layers", "vocab"};

constexpr int kMaxAppendSteps = 1 << 16;
constexpr int kMaxModelLayers = 1024;
constexpr int kMaxModelVocab = 1 << 20;

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A key of another kind of case names itself, at the path where it was written.
void reject_keys(const JsonObjectReader& r, const json& merged, const std::vector<std::string>& keys,
                 const std::string& why) {
  for (const auto& key : keys) {
    if (merged.contains(key)) throw InputError(r.where(key), why);
  }
}

void reject_keys_of_other_kinds(const JsonObjectReader& r, const json& merged, CaseKind kind) {
  if (kind == CaseKind::decode) {
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
}

// mode, state, accum, smooth_k and pv of a prefill or model case whose key tiles are `geometry`'s.
Numerics read_numerics(JsonObjectReader& r, const TileGeometry& geometry) {
  Numerics nu;
  nu.mode = read_enum(r, "mode", kQuantModeNames, nu.mode);
  nu.state = read_enum(r, "state", kStatePrecisionNames, nu.state);
  nu.accum = read_enum(r, "accum", kAccumPrecisionNames, nu.accum);
  nu.smooth_k = r.boolean("smooth_k").value_or(nu.smooth_k);
  nu.pv = read_enum(r, "pv", kPvPrecisionNames, nu.pv);
  if (nu.pv != PvPrecision::fp16 && nu.accum != AccumPrecision::fp32) {
    throw InputError(r.where("pv"), std::string("is ") + to_string(nu.pv) +
                                        ": FP8 P V accumulates in FP32, so it needs \"accum\": \"fp32\"");
  }
  if (nu.pv != PvPrecision::fp16 && geometry.block_n != kBlockV) {
    throw InputError(r.where("pv"), std::string("is ") + to_string(nu.pv) + ": FP8 P V takes key tiles of one V " +
                                        "scale block, block_n " + std::to_string(kBlockV) + " (block_n is " +
                                        std::to_string(geometry.block_n) + ")");
  }
  return nu;
}

// A prefill case, or the attention of a model case (`kind`).
void read_prefill_case(JsonObjectReader& r, const Context& ctx, CaseKind kind, CaseSpec& spec) {
  read_lengths(r, spec.where, spec.shape);
  read_heads(r, true, spec.shape);
  validate(spec.shape, spec.where);
  spec.routing = read_routing(r, ctx, kind, spec.shape, spec.where);
  spec.numerics = read_numerics(r, spec.routing.geometry);
  spec.prefill_mainloop = read_enum(r, "mainloop", kPrefillMainloopNames, spec.prefill_mainloop);
  if (spec.numerics.pv != PvPrecision::fp16 && (spec.prefill_mainloop == PrefillMainloop::wgmma ||
                                                 spec.prefill_mainloop == PrefillMainloop::mma_sync)) {
    throw InputError(r.where("mainloop"), std::string("is ") + to_string(spec.prefill_mainloop) +
                                              ": FP8 P V (pv " + to_string(spec.numerics.pv) +
                                              ") runs on the warp_specialized mainloop (or auto)");
  }
}

void read_decode_case(JsonObjectReader& r, const Context& ctx, CaseSpec& spec) {
  DecodeCaseSpec& dc = spec.decode.emplace();
  read_cache_lengths(r, spec.where, dc.shape);
  read_heads(r, false, spec.shape);
  dc.shape.hq = spec.shape.hq;
  dc.shape.hk = spec.shape.hk;
  dc.shape.d = spec.shape.d;
  dc.shape.softmax_scale = spec.shape.softmax_scale;
  validate_decode(dc.shape, spec.where);
  spec.shape = dc.shape.attention_shape();
  spec.routing = read_routing(r, ctx, CaseKind::decode, spec.shape, spec.where);
  dc.cache = read_enum(r, "cache", kCacheKindNames, dc.cache);
  dc.append_steps = int_in(r, "append_steps", 1, kMaxAppendSteps).value_or(dc.append_steps);
  dc.tiles_per_split = int_in(r, "tiles_per_split", 0, 1 << 24).value_or(0);  // 0: the GPU plan
  dc.mainloop = read_enum(r, "mainloop", kDecodeMainloopNames, dc.mainloop);
  dc.combine = read_enum(r, "combine", kDecodeCombineWaitNames, dc.combine);
  if (dc.cache == CacheKind::fp16 && spec.routing.layout != LayoutKind::zero) {
    throw InputError(r.where("layout"), std::string("must be zero with cache fp16 (the FP16 cache has no INT8 score ") +
                                            "path), got " + to_string(spec.routing.layout));
  }
}

void read_model_case(JsonObjectReader& r, const Context& ctx, CaseSpec& spec) {
  read_prefill_case(r, ctx, CaseKind::model, spec);
  const AttentionShape& shape = spec.shape;
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

// compare_with of a prefill case: its keys replace the case's own, and the case read again with
// them gives the routing and numerics of the run that the case's rows are compared with.
Comparison read_comparison(JsonObjectReader& r, const json& merged, const Origins& origins, const Context& ctx,
                           const std::string& case_path) {
  auto cr = r.object("compare_with");
  const json& keys = merged.at("compare_with");
  apply_origins(*cr, keys, origins, "compare_with.");
  Comparison c;
  std::vector<std::string> methods;
  for (Method m : kComparisonMethods) methods.push_back(to_string(m));
  c.method = *parse_enum(kMethodNames, cr->choice("method", methods).value_or(to_string(c.method)));
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

// Accepted as an axis or --set key: a case key, or a dotted key inside input, compare_with or
// tolerance.
bool known_case_key(const std::string& key) {
  const auto dot = key.find('.');
  if (dot == std::string::npos) return contains(kCaseKeys, key);
  const std::string head = key.substr(0, dot), rest = key.substr(dot + 1);
  if (head == "input") return known_input_key(rest);
  if (head == "compare_with") return contains(kComparisonKeys, rest);
  return head == "tolerance" && known_tolerance_key(rest);
}

}  // namespace

CaseSpec read_case(const json& merged, const Origins& origins, const Context& ctx, const std::string& case_path) {
  CaseSpec spec;
  spec.where = ctx.at(case_path);
  spec.json = merged;
  JsonObjectReader r(merged, ctx.file, case_path);
  apply_origins(r, merged, origins, "");

  spec.name = r.string("name").value_or("");
  const CaseKind kind = read_enum(r, "kind", kCaseKindNames, CaseKind::prefill);
  reject_keys_of_other_kinds(r, merged, kind);
  switch (kind) {
    case CaseKind::prefill: read_prefill_case(r, ctx, kind, spec); break;
    case CaseKind::decode: read_decode_case(r, ctx, spec); break;
    case CaseKind::model: read_model_case(r, ctx, spec); break;
  }

  spec.input.seed = spec.routing.seed;
  read_input(r, merged, origins, ctx, spec.shape.d, spec.input);
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

void require_case_key(const std::string& key, const std::string& where) {
  if (known_case_key(key)) return;
  throw InputError(where, "unknown case key '" + key + "' (expected one of: " + comma_list(kCaseKeys) +
                              ", or input.<key>, tolerance.<which>.<bound>)");
}

}  // namespace tilemix::config_reading
