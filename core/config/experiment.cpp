#include "core/config/experiment.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>

#include "core/config/case_reading.hpp"
#include "core/config/json_reader.hpp"
#include "core/config/merge.hpp"
#include "core/error.hpp"
#include "core/sizes.hpp"

namespace tilemix {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace config_reading;

const std::vector<std::string> kTopKeys = {"name", "description", "defaults", "cases", "axes", "methods", "timing"};

// What a config may expand to: every case keeps its sequence lengths and its merged JSON, so
// these bound the memory and the time of reading one (docs/config.md).
constexpr int64_t kMaxCases = 100000;
constexpr int64_t kMaxConfigSequences = int64_t{1} << 22;  // summed over the expanded cases
constexpr size_t kMaxCaseNameBytes = 1024;

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
      kinds_text = comma_list(kinds) + " and " + kinds_text;
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
  require_case_key(axis.key, axis.path);
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

// The file's axes in `axis_order`, then the --set overrides, each replacing the axis of its key
// (in place) or added after them; the overrides are written into `j` as axes.
std::vector<Axis> read_axes(json& j, const std::vector<std::string>& axis_order,
                            const std::vector<std::string>& overrides, const Context& ctx) {
  std::vector<Axis> axes;
  if (j.contains("axes")) {
    const json& a = j.at("axes");
    if (!a.is_object()) json_type_error(ctx.at("$.axes"), "object of arrays", a);
    for (const auto& key : axis_order) {
      Axis axis;
      axis.key = key;
      axis.path = member_path("$.axes", key);
      const json& values = a.at(key);
      require_case_key(key, ctx.at(axis.path));
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
  return axes;
}

// Each case object with its JSON path; one empty case when the config lists none.
std::vector<std::pair<json, std::string>> read_case_layers(JsonObjectReader& r, const Context& ctx) {
  std::vector<std::pair<json, std::string>> layers;
  if (!r.has("cases")) {
    layers.emplace_back(json::object(), "$.defaults");
    return layers;
  }
  const json& cases = r.raw("cases");
  if (!cases.is_array() || cases.empty()) json_type_error(r.where("cases"), "non-empty array of objects", cases);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string case_path = "$.cases[" + std::to_string(i) + "]";
    if (!cases[i].is_object()) json_type_error(ctx.at(case_path), "object", cases[i]);
    layers.emplace_back(cases[i], case_path);
  }
  return layers;
}

// The listed methods into cfg.methods, and where each was listed into `wheres`.
void read_methods(JsonObjectReader& r, ExperimentConfig& cfg, std::vector<std::string>& wheres) {
  if (!r.has("methods")) return;
  const json& methods = r.raw("methods");
  if (!methods.is_array()) json_type_error(r.where("methods"), "array of method names", methods);
  for (size_t i = 0; i < methods.size(); ++i) {
    const std::string where = r.where("methods") + "[" + std::to_string(i) + "]";
    if (!methods[i].is_string()) json_type_error(where, "string", methods[i]);
    const std::string name = methods[i].get<std::string>();
    const std::optional<Method> m = parse_enum(kMethodNames, name);
    if (!m) {
      throw InputError(where, "unknown method '" + name + "' (expected one of: " +
                                  comma_list(enum_names(kMethodNames)) + ")");
    }
    if (std::find(cfg.methods.begin(), cfg.methods.end(), *m) != cfg.methods.end()) {
      throw InputError(where, "method '" + name + "' is listed twice");
    }
    cfg.methods.push_back(*m);
    wheres.push_back(where);
  }
}

void read_timing(JsonObjectReader& tr, TimingSpec& t) {
  t.warmup = int_in(tr, "warmup", 0, 1000000).value_or(t.warmup);
  t.warmup_seconds = number_at_least(tr, "warmup_seconds", 0.0, true).value_or(t.warmup_seconds);
  t.min_reps = int_in(tr, "min_reps", 1, 1000000).value_or(t.min_reps);
  t.max_reps = int_in(tr, "max_reps", 1, 1000000).value_or(t.max_reps);
  if (t.max_reps < t.min_reps) {
    throw InputError(tr.where("max_reps"),
                     "must be >= min_reps (" + std::to_string(t.min_reps) + "), got " + std::to_string(t.max_reps));
  }
  t.max_seconds = number_at_least(tr, "max_seconds", 0.0, true).value_or(t.max_seconds);
  t.noise = number_at_least(tr, "noise", 0.0, false).value_or(t.noise);
  t.flush_l2 = tr.boolean("flush_l2").value_or(t.flush_l2);
  tr.finish();
}

// Every case layer over the defaults times every combination of axis values, read into cfg.cases.
void expand_cases(ExperimentConfig& cfg, const json& defaults, const std::vector<std::pair<json, std::string>>& layers,
                  const std::vector<Axis>& axes, const std::vector<std::string>& method_wheres, const Context& ctx) {
  std::vector<SizeFactor> factors{{static_cast<int64_t>(layers.size()), "cases"}};
  for (const auto& axis : axes) factors.emplace_back(static_cast<int64_t>(axis.values.size()), axis.path);
  const int64_t case_count =
      checked_product(ctx.at(axes.empty() ? "$.cases" : "$.axes"), "the number of cases", factors, kMaxCases);
  const int64_t combos = case_count / static_cast<int64_t>(layers.size());

  std::map<std::string, std::string> names;  // case name -> where it was defined
  int64_t sequences = 0;                     // of the cases read so far
  for (size_t c = 0; c < layers.size(); ++c) {
    const auto& [layer, case_path] = layers[c];
    // Defaults and the case merged once; lengths in the forms that an axis replaces are dropped
    // here rather than copied into every combination.
    json base = json::object();
    Origins base_origins;
    merge_layer(base, base_origins, defaults, "$.defaults", ctx);
    merge_layer(base, base_origins, layer, case_path, ctx);
    for (const Axis& axis : axes) drop_lengths_replaced_by(base, base_origins, axis.key);
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
}

ExperimentConfig parse_impl(json j, const std::vector<std::string>& axis_order, const std::string& path,
                            const std::vector<std::string>& overrides) {
  const Context ctx{path, fs::path(path).parent_path()};
  ExperimentConfig cfg;
  cfg.path = path;
  if (!j.is_object()) json_type_error(ctx.at("$"), "object", j);
  const std::vector<Axis> axes = read_axes(j, axis_order, overrides, ctx);
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
  const auto case_layers = read_case_layers(r, ctx);
  if (r.has("axes")) r.raw("axes");  // read above, in file order
  std::vector<std::string> method_wheres;  // "$.methods[i]" of cfg.methods[i]
  read_methods(r, cfg, method_wheres);
  if (auto tr = r.object("timing")) read_timing(*tr, cfg.timing);
  r.finish();

  expand_cases(cfg, defaults, case_layers, axes, method_wheres, ctx);
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
