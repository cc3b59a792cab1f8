#include "apps/bench/shard_merge.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "apps/common/table_columns.hpp"
#include "core/config/json_reader.hpp"
#include "core/error.hpp"

namespace tilemix::app {
namespace {

const nlohmann::json& member(const nlohmann::json& obj, const std::string& key, const std::string& where,
                             const char* expected, bool (nlohmann::json::*is_type)() const noexcept) {
  const auto it = obj.find(key);
  if (it == obj.end()) throw InputError(where + "." + key, std::string("missing, expected ") + expected);
  if (!((*it).*is_type)()) json_type_error(where + "." + key, expected, *it);
  return *it;
}

std::set<std::string> keys_of(const nlohmann::json& row) {
  std::set<std::string> keys;
  for (const auto& item : row.items()) keys.insert(item.key());
  return keys;
}

const nlohmann::json& shard_of(const ShardOutput& s) { return s.provenance.at("shard"); }
int shard_index(const ShardOutput& s) { return shard_of(s).at("index").get<int>(); }
int shard_count(const ShardOutput& s) { return shard_of(s).at("count").get<int>(); }

// Why `s` is not a shard of the same sweep as `first`, or "" when it is.
std::string other_sweep(const ShardOutput& first, const ShardOutput& s) {
  if (s.provenance.at("config") != first.provenance.at("config")) return "the config differs (--set included)";
  const nlohmann::json& a = shard_of(first);
  const nlohmann::json& b = shard_of(s);
  if (b.at("count") != a.at("count")) {
    return fmt::format("it is one of {} shards, not {}", b.at("count").dump(), a.at("count").dump());
  }
  if (b.value("run", nlohmann::json()) != a.value("run", nlohmann::json())) {
    return fmt::format("the run options differ ({} against {})", b.value("run", nlohmann::json()).dump(),
                       a.value("run", nlohmann::json()).dump());
  }
  for (const char* key : {"case_count", "group_count", "row_order"}) {
    if (b.at(key) != a.at(key)) return fmt::format("its {} is {}, not {}", key, b.at(key).dump(), a.at(key).dump());
  }
  return "";
}

Cell cell_of(const nlohmann::json& v, const std::string& where) {
  if (v.is_null()) return std::monostate{};
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) return v.get<std::string>();
  json_type_error(where, "a number, string, boolean or null", v);
}

}  // namespace

ShardOutput read_shard_output(const std::string& path) {
  const nlohmann::json doc = read_json_file(path);
  const std::string where = path + ": $";
  if (!doc.is_object()) json_type_error(where, "an object with provenance and rows (tilemix-bench JSON output)", doc);
  const auto is_object = &nlohmann::json::is_object;
  const auto is_integer = &nlohmann::json::is_number_integer;
  ShardOutput out{path, member(doc, "provenance", where, "an object", is_object),
                  member(doc, "rows", where, "an array", &nlohmann::json::is_array)};
  const std::string prov = where + ".provenance";
  if (!out.provenance.contains("shard")) {
    throw InputError(prov + ".shard", "missing: not the output of a tilemix-bench --shard K/N run");
  }
  member(out.provenance, "config", prov, "an object", is_object);
  const nlohmann::json& shard = member(out.provenance, "shard", prov, "an object", is_object);
  const std::string at = prov + ".shard";
  for (const char* key : {"index", "count", "case_count", "group_count"}) member(shard, key, at, "an integer", is_integer);
  member(shard, "row_order", at, "a string", &nlohmann::json::is_string);
  member(shard, "complete", at, "a boolean", &nlohmann::json::is_boolean);
  const int index = shard.at("index").get<int>(), count = shard.at("count").get<int>();
  if (count < 1 || index < 1 || index > count) throw InputError(at, fmt::format("is shard {}/{}", index, count));
  const int64_t case_count = shard.at("case_count").get<int64_t>();
  for (const auto& item : member(shard, "cases", at, "an object", is_object).items()) {
    const nlohmann::json& position = item.value();
    if (!position.is_number_integer() || position.get<int64_t>() < 0 || position.get<int64_t>() >= case_count) {
      throw InputError(at + ".cases." + item.key(), fmt::format("expected a position in [0, {})", case_count));
    }
  }
  for (size_t r = 0; r < out.rows.size(); ++r) {
    const std::string row = where + ".rows[" + std::to_string(r) + "]";
    if (!out.rows[r].is_object()) json_type_error(row, "an object", out.rows[r]);
    const auto name = member(out.rows[r], "case", row, "a string", &nlohmann::json::is_string).get<std::string>();
    if (!shard.at("cases").contains(name)) {
      throw InputError(row + ".case", "'" + name + "' is not one of the cases of shard " + shard.value("spec", ""));
    }
  }
  return out;
}

MergedOutput merge_shards(const std::vector<ShardOutput>& shards, bool allow_partial,
                          const std::vector<std::string>& argv) {
  if (shards.empty()) throw InputError("merge", "no shard outputs given");
  const ShardOutput& first = shards.front();
  const int count = shard_count(first);
  std::map<int, const ShardOutput*> by_index;
  std::map<std::string, const ShardOutput*> holder;  // case name -> the file that holds it
  const nlohmann::json* columns_row = nullptr;
  const ShardOutput* columns_file = nullptr;
  MergedOutput out;
  for (const ShardOutput& s : shards) {
    const std::string why = other_sweep(first, s);
    if (!why.empty()) throw InputError(s.path, "not a shard of the same sweep as " + first.path + ": " + why);
    const auto [seen, fresh] = by_index.emplace(shard_index(s), &s);
    if (!fresh) {
      throw InputError(s.path, fmt::format("is shard {}/{}, as is {} (overlapping shards)", shard_index(s), count,
                                           seen->second->path));
    }
    for (const auto& item : shard_of(s).at("cases").items()) {
      const auto [other, unique] = holder.emplace(item.key(), &s);
      if (!unique) {
        throw InputError(s.path, "holds case '" + item.key() + "', as does " + other->second->path +
                                     " (overlapping rows: shards sliced by different versions?)");
      }
    }
    for (const nlohmann::json& row : s.rows) {
      if (!columns_row) {
        columns_row = &row;
        columns_file = &s;
      } else if (keys_of(row) != keys_of(*columns_row)) {
        throw InputError(s.path, "has rows with other columns than those of " + columns_file->path);
      }
    }
    if (!shard_of(s).at("complete").get<bool>()) {
      if (!allow_partial) {
        throw InputError(s.path, fmt::format("shard {}/{} did not finish (its run was interrupted or failed); "
                                             "merge --partial joins it as it is",
                                             shard_index(s), count));
      }
      out.unfinished.push_back(s.path);
    }
  }
  for (int k = 1; k <= count; ++k) {
    if (!by_index.count(k)) out.missing.push_back(fmt::format("{}/{}", k, count));
  }
  if (!out.missing.empty() && !allow_partial) {
    std::vector<std::string> given;
    for (const auto& [k, s] : by_index) given.push_back(fmt::format("{} ({}/{})", s->path, k, count));
    const bool several = out.missing.size() > 1;
    throw InputError("merge", fmt::format("shard{} {} {} missing (given: {}); merge --partial joins the shards given",
                                          several ? "s" : "", fmt::join(out.missing, ", "), several ? "are" : "is",
                                          fmt::join(given, ", ")));
  }
  if (out.missing.empty() && holder.size() != shard_of(first).at("case_count").get<size_t>()) {
    throw InputError("merge", fmt::format("the shards of {} hold {} cases, not the sweep's {}", first.path,
                                          holder.size(), shard_of(first).at("case_count").dump()));
  }

  // Rows in the unsharded order: by their case's position there; a case's rows, all from one
  // file, keep their order.
  struct PlacedRow {
    int64_t position;
    const nlohmann::json* row;
  };
  std::vector<PlacedRow> placed;
  nlohmann::json shard_provenance = nlohmann::json::array();
  bool same_device = true;
  std::vector<std::string> measured_by;  // the shards' builds, each once, in shard order
  for (const auto& [k, s] : by_index) {
    const nlohmann::json& cases = shard_of(*s).at("cases");
    for (const nlohmann::json& row : s->rows) placed.push_back({cases.at(row.at("case").get<std::string>()), &row});
    nlohmann::json prov = s->provenance;
    prov.erase("config");  // the same in every shard: kept once, at the top
    prov["file"] = s->path;
    shard_provenance.push_back(std::move(prov));
    same_device = same_device && s->provenance.value("device", nlohmann::json()) ==
                                     first.provenance.value("device", nlohmann::json());
    const std::string sha = s->provenance.value("git_sha", "?");
    if (std::find(measured_by.begin(), measured_by.end(), sha) == measured_by.end()) measured_by.push_back(sha);
  }
  std::stable_sort(placed.begin(), placed.end(),
                   [](const PlacedRow& a, const PlacedRow& b) { return a.position < b.position; });
  nlohmann::json rows = nlohmann::json::array();
  for (const PlacedRow& p : placed) rows.push_back(*p.row);

  // git_sha names the build that measured the rows: the shards' own, joined with " + " where they
  // differ. merge.git_sha is the build that merged them.
  nlohmann::json provenance = {
      {"tool", "tilemix-bench"},
      {"version", tool_version()},
      {"git_sha", fmt::format("{}", fmt::join(measured_by, " + "))},
      {"argv", argv},
      {"config_path", first.provenance.value("config_path", "")},
      {"config", first.provenance.at("config")},
      {"host", host_name()},
      {"time_utc", utc_time()},
      {"device", same_device ? first.provenance.value("device", nlohmann::json()) : nlohmann::json()},
      {"merge",
       {{"git_sha", git_sha()},
        {"shard_count", count},
        {"partial", !out.missing.empty() || !out.unfinished.empty()},
        {"missing", out.missing},
        {"unfinished", out.unfinished},
        {"shards", shard_provenance}}}};
  out.document = {{"provenance", std::move(provenance)}, {"rows", std::move(rows)}};
  return out;
}

ResultTable bench_table_of(const nlohmann::json& rows, const std::string& out_path) {
  if (rows.empty()) throw InputError(out_path, "no rows to write as a table: write the merge as .json");
  const std::set<std::string> keys = keys_of(rows.front());
  const std::vector<ResultTable> tables{prefill_gpu_table().empty_table(), decode_gpu_table().empty_table(),
                                        model_table().empty_table(), emulator_table().empty_table()};
  for (ResultTable table : tables) {
    std::set<std::string> columns;
    for (const Column& c : table.columns) columns.insert(c.key);
    if (columns != keys) continue;
    for (size_t r = 0; r < rows.size(); ++r) {
      std::vector<Cell> cells;
      for (const Column& c : table.columns) {
        cells.push_back(cell_of(rows[r].at(c.key), fmt::format("$.rows[{}].{}", r, c.key)));
      }
      table.add_row(std::move(cells));
    }
    return table;
  }
  throw InputError(out_path, "the rows have the columns of no tilemix-bench table: write the merge as .json");
}

}  // namespace tilemix::app
