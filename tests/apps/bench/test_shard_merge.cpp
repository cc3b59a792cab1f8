// tilemix-bench merge (apps/bench/shard_merge.hpp): the shards of a sweep join into the rows of
// the unsharded run, and everything that would make the join wrong is an error naming the files.
// The last tests run the real executable: sharded CPU runs merged equal the unsharded run.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/bench/case_groups.hpp"
#include "apps/bench/shard_merge.hpp"
#include "apps/bench/sweep_shard.hpp"
#include "apps/common/table_columns.hpp"
#include "core/config/experiment.hpp"
#include "core/error.hpp"
#include "core/report/table.hpp"
#include "tests/apps/run_command.hpp"

namespace fs = std::filesystem;
using tilemix::testing::run;
using tilemix::testing::Run;
using namespace tilemix;
using namespace tilemix::app;

namespace {

// 3 lengths (3 groups of unequal work) x 2 layouts, the groups interleaved in the config's order.
nlohmann::json sweep_json(const std::string& name = "merge-test") {
  return {{"name", name},
          {"defaults", {{"batch", 1}, {"hq", 2}, {"hk", 1}, {"d", 64}, {"causal", true}, {"ratio", 0.5}}},
          {"cases", {{{"name", "band"}, {"layout", "band"}}, {{"name", "sptrans"}, {"layout", "sptrans"}}}},
          {"axes", {{"seq_len", {128, 256, 384}}}}};
}

// Two rows per case, as a bench writes a case's methods.
nlohmann::json rows_of(const std::vector<std::string>& cases) {
  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& name : cases) {
    for (const char* method : {"first", "second"}) rows.push_back({{"case", name}, {"method", method}, {"value", 1.5}});
  }
  return rows;
}

// What the unsharded run writes, in `order`.
std::vector<std::string> unsharded_cases(const ExperimentConfig& config, RowOrder order) {
  std::vector<std::string> out;
  if (order == RowOrder::by_case) {
    for (const CaseSpec& spec : config.cases) out.push_back(spec.name);
  } else {
    for (const CaseGroup& g : group_cases(config, group_key)) {
      for (const CaseSpec* spec : g) out.push_back(spec->name);
    }
  }
  return out;
}

// Shard k of n as tilemix-bench --shard writes it, with rows_of its cases in its run's order.
ShardOutput shard_output(const ExperimentConfig& config, int k, int n, RowOrder order) {
  const SweepShard shard = select_shard(config, {k, n}, order);
  nlohmann::json recorded = shard.provenance;
  recorded["run"] = {{"device", "cpu"}, {"deviation", false}, {"reference", false}};
  recorded["complete"] = true;
  const nlohmann::json provenance = {{"tool", "tilemix-bench"},
                                     {"git_sha", "abc" + std::to_string(k)},
                                     {"argv", {"tilemix-bench", "--shard", std::to_string(k) + "/" + std::to_string(n)}},
                                     {"config_path", "merge-test.json"},
                                     {"config", config.json},
                                     {"host", "node" + std::to_string(k)},
                                     {"time_utc", "2026-01-0" + std::to_string(k) + "T00:00:00Z"},
                                     {"device", {{"kind", "cpu"}}},
                                     {"shard", recorded}};
  std::vector<std::string> cases;
  for (const std::string& name : unsharded_cases(shard.config, order)) cases.push_back(name);
  return {"shard" + std::to_string(k) + ".json", provenance, rows_of(cases)};
}

std::vector<ShardOutput> all_shards(const ExperimentConfig& config, int n, RowOrder order) {
  std::vector<ShardOutput> out;
  for (int k = 1; k <= n; ++k) out.push_back(shard_output(config, k, n, order));
  return out;
}

// The InputError that `f` throws: its where() and message.
template <typename F>
std::pair<std::string, std::string> input_error(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return {e.where(), e.what()};
  }
  FAIL("no InputError");
  return {};
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("tilemix-merge-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace

TEST_CASE("merge puts every shard's rows back in the unsharded order and keeps each provenance", "[shard]") {
  const ExperimentConfig config = parse_config(sweep_json(), "merge-test.json");
  for (const RowOrder order : {RowOrder::by_group, RowOrder::by_case}) {
    INFO((order == RowOrder::by_group ? "by group" : "by case"));
    const std::vector<std::string> expected = unsharded_cases(config, order);
    std::vector<ShardOutput> shards = all_shards(config, 3, order);
    std::reverse(shards.begin(), shards.end());
    const MergedOutput merged = merge_shards(shards, false, {"tilemix-bench", "merge", "out.json"});
    CHECK(merged.document.at("rows") == rows_of(expected));
    CHECK(merged.missing.empty());
    CHECK(merged.unfinished.empty());

    const nlohmann::json& p = merged.document.at("provenance");
    CHECK(p.at("config") == config.json);
    CHECK(p.at("argv") == nlohmann::json({"tilemix-bench", "merge", "out.json"}));
    CHECK(p.at("device") == nlohmann::json({{"kind", "cpu"}}));
    CHECK(p.at("merge").at("partial") == false);
    CHECK(p.at("merge").at("shard_count") == 3);
    // The builds that measured the rows, in shard order; the merging build apart.
    CHECK(p.at("git_sha") == "abc1 + abc2 + abc3");
    CHECK(p.at("merge").at("git_sha") == git_sha());
    const nlohmann::json& kept = p.at("merge").at("shards");
    REQUIRE(kept.size() == 3);
    for (int k = 1; k <= 3; ++k) {
      const nlohmann::json& s = kept[static_cast<size_t>(k - 1)];
      CHECK(s.at("file") == "shard" + std::to_string(k) + ".json");
      CHECK(s.at("shard").at("index") == k);
      CHECK(s.at("host") == "node" + std::to_string(k));
      CHECK(s.at("git_sha") == "abc" + std::to_string(k));
      CHECK(s.at("time_utc") == "2026-01-0" + std::to_string(k) + "T00:00:00Z");
      CHECK(s.at("argv").at(2) == std::to_string(k) + "/3");
      CHECK(s.at("device") == nlohmann::json({{"kind", "cpu"}}));
      CHECK_FALSE(s.contains("config"));  // once, at the top
    }
  }
}

TEST_CASE("merge refuses shards of different sweeps, naming both files", "[shard]") {
  const ExperimentConfig config = parse_config(sweep_json(), "merge-test.json");
  const ExperimentConfig other = parse_config(sweep_json("other-name"), "merge-test.json");
  std::vector<ShardOutput> shards = all_shards(config, 2, RowOrder::by_case);

  SECTION("another config") {
    shards[1] = shard_output(other, 2, 2, RowOrder::by_case);
    shards[1].path = "other.json";
    const auto [where, what] = input_error([&] { merge_shards(shards, false, {}); });
    CHECK(where == "other.json");
    CHECK(has(what, "not a shard of the same sweep as shard1.json: the config differs"));
  }
  SECTION("another N") {
    shards[1] = shard_output(config, 2, 3, RowOrder::by_case);
    const auto [where, what] = input_error([&] { merge_shards(shards, false, {}); });
    CHECK(where == "shard2.json");
    CHECK(has(what, "shard1.json"));
    CHECK(has(what, "one of 3 shards, not 2"));
  }
  SECTION("other run options") {
    shards[1].provenance["shard"]["run"]["device"] = "gpu";
    const auto [where, what] = input_error([&] { merge_shards(shards, false, {}); });
    CHECK(where == "shard2.json");
    CHECK(has(what, "shard1.json"));
    CHECK(has(what, "run options differ"));
  }
  SECTION("another row order") {
    shards[1] = shard_output(config, 2, 2, RowOrder::by_group);
    const auto [where, what] = input_error([&] { merge_shards(shards, false, {}); });
    CHECK(where == "shard2.json");
    CHECK(has(what, "row_order"));
  }
}

TEST_CASE("merge refuses overlapping shards and rows, naming both files", "[shard]") {
  const ExperimentConfig config = parse_config(sweep_json(), "merge-test.json");
  std::vector<ShardOutput> shards = all_shards(config, 2, RowOrder::by_case);

  SECTION("the same shard twice") {
    ShardOutput copy = shards[0];
    copy.path = "copy.json";
    shards.push_back(copy);
    const auto [where, what] = input_error([&] { merge_shards(shards, false, {}); });
    CHECK(where == "copy.json");
    CHECK(has(what, "is shard 1/2, as is shard1.json"));
  }
  SECTION("a case in two shards") {
    const auto first_case = shards[0].provenance["shard"]["cases"].begin();
    shards[1].provenance["shard"]["cases"][first_case.key()] = first_case.value();
    const auto [where, what] = input_error([&] { merge_shards(shards, false, {}); });
    CHECK(where == "shard2.json");
    CHECK(has(what, "holds case '" + first_case.key() + "', as does shard1.json"));
  }
  SECTION("rows with other columns") {
    shards[1].rows[0]["extra"] = 1;
    const auto [where, what] = input_error([&] { merge_shards(shards, false, {}); });
    CHECK(where == "shard2.json");
    CHECK(has(what, "other columns than those of shard1.json"));
  }
}

TEST_CASE("missing and unfinished shards are errors, or a flagged partial merge with --partial", "[shard]") {
  const ExperimentConfig config = parse_config(sweep_json(), "merge-test.json");
  const std::vector<ShardOutput> shards = all_shards(config, 3, RowOrder::by_group);

  const std::vector<ShardOutput> given{shards[0], shards[2]};
  const auto [where, what] = input_error([&] { merge_shards(given, false, {}); });
  CHECK(where == "merge");
  CHECK(has(what, "shard 2/3 is missing (given: shard1.json (1/3), shard3.json (3/3))"));
  const auto [where_two, what_two] = input_error([&] { merge_shards({shards[1]}, false, {}); });
  CHECK(has(what_two, "shards 1/3, 3/3 are missing"));

  const MergedOutput partial = merge_shards(given, true, {});
  CHECK(partial.missing == std::vector<std::string>{"2/3"});
  const nlohmann::json& merge = partial.document.at("provenance").at("merge");
  CHECK(merge.at("partial") == true);
  CHECK(merge.at("missing") == nlohmann::json({"2/3"}));
  std::vector<std::string> expected;
  for (const std::string& name : unsharded_cases(config, RowOrder::by_group)) {
    if (!shards[1].provenance["shard"]["cases"].contains(name)) expected.push_back(name);
  }
  CHECK(partial.document.at("rows") == rows_of(expected));

  std::vector<ShardOutput> interrupted = shards;
  interrupted[1].provenance["shard"]["complete"] = false;
  interrupted[1].rows.erase(interrupted[1].rows.size() - 1);
  const auto [where_u, what_u] = input_error([&] { merge_shards(interrupted, false, {}); });
  CHECK(where_u == "shard2.json");
  CHECK(has(what_u, "shard 2/3 did not finish"));
  const MergedOutput flagged = merge_shards(interrupted, true, {});
  CHECK(flagged.unfinished == std::vector<std::string>{"shard2.json"});
  CHECK(flagged.document.at("provenance").at("merge").at("partial") == true);
  CHECK(flagged.document.at("rows").size() == 2 * config.cases.size() - 1);
}

TEST_CASE("a shard file that cannot be read or was not written with --shard is an error naming it", "[shard]") {
  const fs::path dir = temp_dir("read");
  const ExperimentConfig config = parse_config(sweep_json(), "merge-test.json");
  const ShardOutput good = shard_output(config, 1, 2, RowOrder::by_case);
  const auto document = [&](const nlohmann::json& provenance, const nlohmann::json& rows) {
    return nlohmann::json{{"provenance", provenance}, {"rows", rows}}.dump();
  };
  const std::string ok = write_file(dir / "ok.json", document(good.provenance, good.rows));
  const ShardOutput read = read_shard_output(ok);
  CHECK(read.path == ok);
  CHECK(read.provenance == good.provenance);
  CHECK(read.rows == good.rows);

  nlohmann::json no_shard = good.provenance;
  no_shard.erase("shard");
  nlohmann::json bad_index = good.provenance;
  bad_index["shard"]["index"] = 3;
  nlohmann::json bad_position = good.provenance;
  bad_position["shard"]["cases"].begin().value() = 99;
  nlohmann::json foreign_row = good.rows;
  foreign_row[0]["case"] = "not-a-case";
  const std::vector<std::pair<std::string, std::string>> bad{
      {write_file(dir / "text.json", "case,method\n"), "invalid JSON"},
      {write_file(dir / "array.json", "[]"), "$: expected an object with provenance and rows"},
      {write_file(dir / "unsharded.json", document(no_shard, good.rows)), "$.provenance.shard: missing: not the output "
                                                                          "of a tilemix-bench --shard K/N run"},
      {write_file(dir / "index.json", document(bad_index, good.rows)), "$.provenance.shard: is shard 3/2"},
      {write_file(dir / "position.json", document(bad_position, good.rows)), "expected a position in [0, 6)"},
      {write_file(dir / "foreign.json", document(good.provenance, foreign_row)),
       "$.rows[0].case: 'not-a-case' is not one of the cases of shard 1/2"},
      {(dir / "absent.json").string(), "cannot open file"},
      {dir.string(), "is a directory"}};
  for (const auto& file : bad) {
    const std::string& path = file.first;
    const std::string& expected = file.second;
    INFO(path);
    const auto [where, what] = input_error([&] { read_shard_output(path); });
    CHECK(has(where, path));
    CHECK(has(what, expected));
  }
  fs::remove_all(dir);
}

TEST_CASE("merged rows become the tilemix-bench table with their columns, for CSV and Markdown", "[shard]") {
  ResultTable model = model_table().empty_table();
  nlohmann::json row = nlohmann::json::object();
  for (const Column& c : model.columns) row[c.key] = nullptr;
  row["case"] = "a";
  row["layers"] = 3;
  row["seconds"] = 0.5;
  row["causal"] = true;
  const ResultTable table = bench_table_of(nlohmann::json::array({row}), "out.csv");
  REQUIRE(table.columns.size() == model.columns.size());
  for (size_t c = 0; c < table.columns.size(); ++c) CHECK(table.columns[c].header == model.columns[c].header);
  REQUIRE(table.rows.size() == 1);
  CHECK(std::get<std::string>(table.rows[0][static_cast<size_t>(table.column("case"))]) == "a");
  CHECK(std::get<int64_t>(table.rows[0][static_cast<size_t>(table.column("layers"))]) == 3);
  CHECK(std::get<double>(table.rows[0][static_cast<size_t>(table.column("seconds"))]) == 0.5);
  CHECK(std::get<bool>(table.rows[0][static_cast<size_t>(table.column("causal"))]));
  CHECK(std::holds_alternative<std::monostate>(table.rows[0][static_cast<size_t>(table.column("status"))]));

  row["not_a_column"] = 1;
  const auto [where, what] = input_error([&] { bench_table_of(nlohmann::json::array({row}), "out.md"); });
  CHECK(where == "out.md");
  CHECK(has(what, "columns of no tilemix-bench table"));
}

// ---- the executable ----

namespace {

const std::string kBench = TILEMIX_BENCH_EXE;

nlohmann::json read_json(const fs::path& path) { return nlohmann::json::parse(std::ifstream(path)); }

// The rows without `timing` (a wall time, different in every run).
nlohmann::json without(nlohmann::json rows, const std::string& timing) {
  for (auto& row : rows) {
    REQUIRE(row.contains(timing));
    row.erase(timing);
  }
  return rows;
}

std::vector<std::string> csv_lines_without(const fs::path& path, const std::string& timing) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  int skip = -1;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::stringstream ss(line);
    for (std::string f; std::getline(ss, f, ',');) fields.push_back(f);
    if (skip < 0) skip = static_cast<int>(std::find(fields.begin(), fields.end(), timing) - fields.begin());
    REQUIRE(skip < static_cast<int>(fields.size()));
    fields.erase(fields.begin() + skip);
    std::string kept;
    for (const auto& f : fields) kept += f + ",";
    lines.push_back(kept);
  }
  return lines;
}

// Runs the config unsharded and as `n` shards, merges the shards (given last to first) and
// checks the merge against the unsharded run; returns the merged document and the shards' files.
std::pair<nlohmann::json, std::string> shard_and_merge(const fs::path& dir, const nlohmann::json& config, int n,
                                                       const std::string& timing) {
  const std::string cfg = write_file(dir / "cfg.json", config.dump());
  const std::string base = kBench + " --device cpu --format json --config '" + cfg + "'";
  const Run full = run(base + " --out '" + (dir / "full.json").string() + "'");
  INFO(full.out);
  REQUIRE(full.code == 0);
  std::string inputs;
  for (int k = n; k >= 1; --k) {
    const fs::path out = dir / ("shard" + std::to_string(k) + ".json");
    const Run r = run(base + " --shard " + std::to_string(k) + "/" + std::to_string(n) + " --out '" + out.string() + "'");
    INFO(r.out);
    REQUIRE(r.code == 0);
    CHECK(has(r.out, "tilemix-bench: shard " + std::to_string(k) + "/" + std::to_string(n) + ": "));
    const nlohmann::json shard = read_json(out);
    CHECK(shard.at("provenance").at("shard").at("complete") == true);
    CHECK(shard.at("provenance").at("shard").at("spec") == std::to_string(k) + "/" + std::to_string(n));
    inputs += " '" + out.string() + "'";
  }
  const Run merged = run(kBench + " merge '" + (dir / "merged.json").string() + "'" + inputs);
  INFO(merged.out);
  REQUIRE(merged.code == 0);
  const nlohmann::json doc = read_json(dir / "merged.json");
  const nlohmann::json unsharded = read_json(dir / "full.json");
  CHECK(without(doc.at("rows"), timing) == without(unsharded.at("rows"), timing));
  CHECK(doc.at("provenance").at("config") == unsharded.at("provenance").at("config"));
  CHECK(doc.at("provenance").at("merge").at("shards").size() == static_cast<size_t>(n));
  return {doc, inputs};
}

}  // namespace

TEST_CASE("tilemix-bench --shard runs and merge joins the CPU emulator sweep as the unsharded run", "[shard]") {
  const fs::path dir = temp_dir("emulator");
  nlohmann::json config = sweep_json("emulator-shards");
  config["defaults"]["input"] = {{"kind", "llm_like"}, {"seed", 5}};
  // 4 shards of 3 groups: one shard is empty, and merges as such.
  const auto [doc, inputs] = shard_and_merge(dir, config, 4, "cpu_ms");
  CHECK(doc.at("rows").size() == 6);
  CHECK(doc.at("provenance").at("git_sha") == git_sha());  // every shard ran this build
  int empty = 0;
  for (const auto& s : doc.at("provenance").at("merge").at("shards")) empty += s.at("shard").at("cases").empty();
  CHECK(empty == 1);

  // CSV from the merge: the unsharded run's CSV, the wall times aside.
  const std::string cfg = (dir / "cfg.json").string();
  REQUIRE(run(kBench + " --device cpu --config '" + cfg + "' --out '" + (dir / "full.csv").string() + "'").code == 0);
  const Run csv = run(kBench + " merge '" + (dir / "merged.csv").string() + "'" + inputs);
  INFO(csv.out);
  REQUIRE(csv.code == 0);
  CHECK(csv_lines_without(dir / "merged.csv", "cpu_ms") == csv_lines_without(dir / "full.csv", "cpu_ms"));
  fs::remove_all(dir);
}

TEST_CASE("tilemix-bench --shard and merge keep the model sweep's group-by-group rows", "[shard]") {
  const fs::path dir = temp_dir("model");
  // Two groups (1 and 2 layers) interleaved in the config's order: the rows come group by group.
  const nlohmann::json config = {
      {"name", "model-shards"},
      {"defaults",
       {{"kind", "model"}, {"batch", 1}, {"seq_len", 128}, {"hq", 2}, {"hk", 1}, {"d", 64}, {"causal", true},
        {"vocab", 16}}},
      {"cases", {{{"name", "one"}, {"layout", "one"}}, {{"name", "band"}, {"layout", "band"}, {"ratio", 0.5}}}},
      {"axes", {{"layers", {1, 2}}}}};
  const nlohmann::json doc = shard_and_merge(dir, config, 2, "seconds").first;
  std::vector<std::string> cases;
  for (const auto& row : doc.at("rows")) cases.push_back(row.at("case"));
  CHECK(cases.front() == "one/layers=1");
  CHECK(cases.back() == "band/layers=2");
  fs::remove_all(dir);
}

TEST_CASE("tilemix-bench --shard and merge refuse bad input, naming the flag or the files", "[shard]") {
  const fs::path dir = temp_dir("cli-errors");
  const std::string cfg = write_file(dir / "cfg.json", sweep_json("cli-errors").dump());
  const std::string base = kBench + " --device cpu --config '" + cfg + "'";
  for (const char* bad : {"0/2", "3/2", "x", "1/0"}) {
    const Run r = run(base + " --shard " + bad);
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK(has(r.out, std::string("--shard: expected K/N with 1 <= K <= N")));
    CHECK_FALSE(has(r.out, "emulator run"));  // nothing ran
  }

  const fs::path one = dir / "one.json", other = dir / "other.json";
  REQUIRE(run(base + " --shard 1/2 --out '" + one.string() + "'").code == 0);
  REQUIRE(run(base + " --set seq_len=64 --shard 2/2 --out '" + other.string() + "'").code == 0);
  const Run mixed = run(kBench + " merge '" + (dir / "m.json").string() + "' '" + one.string() + "' '" +
                        other.string() + "'");
  INFO(mixed.out);
  CHECK(mixed.code == 2);
  CHECK(has(mixed.out, other.string() + ": not a shard of the same sweep as " + one.string()));
  CHECK_FALSE(fs::exists(dir / "m.json"));

  const Run missing = run(kBench + " merge '" + (dir / "m.json").string() + "' '" + one.string() + "'");
  CHECK(missing.code == 2);
  CHECK(has(missing.out, "shard 2/2 is missing"));
  const Run partial = run(kBench + " merge --partial '" + (dir / "m.json").string() + "' '" + one.string() + "'");
  INFO(partial.out);
  CHECK(partial.code == 0);
  CHECK(has(partial.out, "partial merge, missing shards: 2/2"));
  CHECK(read_json(dir / "m.json").at("provenance").at("merge").at("partial") == true);

  const Run absent = run(kBench + " merge '" + (dir / "m2.json").string() + "' '" + (dir / "absent.json").string() + "'");
  CHECK(absent.code == 2);
  CHECK(has(absent.out, (dir / "absent.json").string() + ": cannot open file"));
  fs::remove_all(dir);
}
