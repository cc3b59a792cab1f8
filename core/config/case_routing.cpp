#include "core/config/case_reading.hpp"

#include <set>
#include <utility>

#include "core/error.hpp"
#include "core/tiling.hpp"

namespace tilemix::config_reading {
namespace {

using nlohmann::json;

// zero and one fix the coverage; file takes it from the words.
void read_ratio(JsonObjectReader& r, const std::string& case_where, RoutingRequest& routing) {
  const auto ratio = r.number("ratio");
  if (ratio && !(*ratio >= 0.0 && *ratio <= 1.0)) {
    throw InputError(r.where("ratio"), "must be in [0, 1] (the requested INT8 coverage), got " + num(*ratio));
  }
  if (routing.layout == LayoutKind::zero) {
    routing.ratio = 0.0;
  } else if (routing.layout == LayoutKind::one) {
    routing.ratio = 1.0;
  } else if (ratio) {
    routing.ratio = *ratio;
  } else if (routing.layout != LayoutKind::file) {
    throw InputError(case_where, std::string("ratio is required for layout ") + to_string(routing.layout) +
                                     " (the INT8 coverage in [0, 1])");
  }
}

// "auto" (nullopt: a group per sequence) or a positive integer.
std::optional<int> read_group(JsonObjectReader& r) {
  if (!r.has("group")) return std::nullopt;
  const json& g = r.raw("group");
  if (g.is_string() && g.get<std::string>() == "auto") return std::nullopt;
  if (!g.is_number_integer() || g.get<int64_t>() < 1 || g.get<int64_t>() > kMaxSeqLen) {
    json_type_error(r.where("group"), "\"auto\" or a positive integer", g);
  }
  return static_cast<int>(g.get<int64_t>());
}

// The tile geometry of a case of `kind`, and a check that the group fits every sequence's tiling.
TileGeometry read_geometry(JsonObjectReader& r, CaseKind kind, const AttentionShape& shape,
                           const std::optional<int>& group, const std::string& case_where) {
  TileGeometry geometry;
  if (kind == CaseKind::decode) {
    geometry = kDecodeGeometry;
  } else {
    geometry.block_m = int_in(r, "block_m", 1, 4096).value_or(geometry.block_m);
    geometry.block_n = int_in(r, "block_n", 1, 4096).value_or(geometry.block_n);
    validate_geometry(geometry, case_where.c_str());
  }
  std::set<std::pair<int64_t, int64_t>> lengths;
  for (int b = 0; b < shape.batch(); ++b) lengths.emplace(shape.seqlen_q(b), shape.seqlen_k(b));
  const std::string group_where = r.where("group");
  for (const auto& [lq, lk] : lengths) make_tiling(lq, lk, shape.causal, geometry, group, group_where.c_str());
  return geometry;
}

// The words file of layout file (required there, refused with any other layout).
std::string read_words_file(JsonObjectReader& r, const Context& ctx, LayoutKind layout) {
  const auto words_file = r.string("words_file");
  if (layout != LayoutKind::file) {
    if (words_file) {
      throw InputError(r.where("words_file"),
                       std::string("is only used with layout file, not ") + to_string(layout));
    }
    return "";
  }
  if (!words_file) {
    throw InputError(r.where("words_file"),
                     "is required for layout file (JSON {\"words\": [[hex, ...] per KV head]} "
                     "or a uint64 .npy)");
  }
  const std::string path = resolve_path(ctx, *words_file);
  require_file(r.where("words_file"), path);
  return path;
}

}  // namespace

RoutingRequest read_routing(JsonObjectReader& r, const Context& ctx, CaseKind kind, const AttentionShape& shape,
                            const std::string& case_where) {
  RoutingRequest routing;
  routing.layout = read_enum(r, "layout", kLayoutNames, routing.layout);
  // Decode routes one 16-row tile of new tokens, and the model's layers make their own Q and K.
  if (routes_from_data(routing.layout) && kind != CaseKind::prefill) {
    throw InputError(r.where("layout"), std::string(to_string(routing.layout)) +
                                            " routes prefill cases from their Q and K; a " + to_string(kind) +
                                            " case takes a static layout or file");
  }
  read_ratio(r, case_where, routing);
  if (const auto seed = read_seed(r)) routing.seed = *seed;
  routing.group = read_group(r);
  routing.geometry = read_geometry(r, kind, shape, routing.group, case_where);
  routing.words_file = read_words_file(r, ctx, routing.layout);
  return routing;
}

}  // namespace tilemix::config_reading
