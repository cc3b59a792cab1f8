#include "core/config/case_reading.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include "core/error.hpp"

namespace tilemix::config_reading {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string> kInputKeys = {
    "kind", "seed", "stddev", "outlier_channels", "outlier_scale", "sink_scale", "local_bias", "k_channel_bias",
    "q",    "k",    "v",      "allow_nonfinite"};
const std::vector<std::string> kToleranceKeys = {"emulator_vs_reference", "gpu_vs_emulator", "gpu_vs_reference"};
const std::vector<std::string> kBoundKeys = {"max_abs", "mean_abs", "rel_l2", "min_cosine"};

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
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

}  // namespace

std::string num(double v) { return json(v).dump(); }

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

std::optional<uint64_t> read_seed(JsonObjectReader& r) {
  const auto seed = r.integer("seed");
  if (!seed) return std::nullopt;
  if (*seed < 0) throw InputError(r.where("seed"), "must be >= 0, got " + std::to_string(*seed));
  return static_cast<uint64_t>(*seed);
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

bool known_input_key(const std::string& key) { return contains(kInputKeys, key); }

bool known_tolerance_key(const std::string& key) {
  const auto dot = key.find('.');
  if (dot == std::string::npos) return contains(kToleranceKeys, key);
  return contains(kToleranceKeys, key.substr(0, dot)) && contains(kBoundKeys, key.substr(dot + 1));
}

void read_input(JsonObjectReader& r, const json& merged, const Origins& origins, const Context& ctx, int d,
                InputSpec& in) {
  auto ir = r.object("input");
  if (!ir) return;
  apply_origins(*ir, merged.at("input"), origins, "input.");
  in.kind = read_enum(*ir, "kind", kInputKindNames, InputKind::gaussian);
  if (const auto seed = read_seed(*ir)) in.seed = *seed;
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

}  // namespace tilemix::config_reading
