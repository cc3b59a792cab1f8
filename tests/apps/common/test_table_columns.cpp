// The columns of every table the apps write: scripts and the committed results (results/h200:
// prefill, decode, model and check runs) read these keys, headers and precisions, so they must not
// change. The GPU tables cannot run without a GPU, so their cells are checked on hand-made
// measurements.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/common/table_columns.hpp"
#include "core/config/experiment.hpp"
#include "core/routing/plan.hpp"

using namespace tilemix;
using namespace tilemix::app;

namespace {

struct Expected {
  const char* key;
  const char* header;
  int precision;
};

void check_columns(const std::vector<Column>& columns, const std::vector<Expected>& expected) {
  REQUIRE(columns.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("column " << i << ": " << expected[i].key);
    CHECK(columns[i].key == expected[i].key);
    CHECK(columns[i].header == expected[i].header);
    CHECK(columns[i].precision == expected[i].precision);
  }
}

const std::vector<Expected> kPrefillCase = {{"case", "case", 3},
                                            {"method", "method", 3},
                                            {"layout", "layout", 3},
                                            {"ratio", "ratio", 3},
                                            {"coverage", "cov.groups", 3},
                                            {"coverage_tiles", "cov.tiles", 3},
                                            {"coverage_cells", "cov.cells", 3},
                                            {"params", "params", 3},
                                            {"batch", "B", 3},
                                            {"hq", "Hq", 3},
                                            {"hk", "Hk", 3},
                                            {"d", "d", 3},
                                            {"lq", "Lq", 3},
                                            {"lk", "Lk", 3},
                                            {"causal", "causal", 3},
                                            {"mode", "mode", 3},
                                            {"state", "state", 3},
                                            {"accum", "accum", 3},
                                            {"smooth_k", "smooth_k", 3},
                                            {"pv", "pv", 3}};

std::vector<Expected> prefill_case_and(const std::vector<Expected>& own) {
  std::vector<Expected> all = kPrefillCase;
  all.insert(all.end(), own.begin(), own.end());
  return all;
}

// The value of column `key` in `row`.
template <typename Row>
Cell cell(const TableLayout<Row>& table, const std::vector<Cell>& row, const std::string& key) {
  for (size_t i = 0; i < table.columns().size(); ++i) {
    if (table.columns()[i].key == key) return row.at(i);
  }
  FAIL("no column " << key);
  return {};
}

bool empty(const Cell& c) { return std::holds_alternative<std::monostate>(c); }

CaseSpec parse_case(const std::string& text) {
  return parse_config(nlohmann::ordered_json::parse(text), "t.json").cases.at(0);
}

gpu::TimingResult timing(double median_ms) {
  gpu::TimingResult t;
  t.ms = {median_ms, median_ms, median_ms};
  t.median_ms = t.min_ms = t.max_ms = median_ms;
  t.rel_std = 0.01;
  t.sm_clock_end_mhz = 1980;
  return t;
}

}  // namespace

TEST_CASE("the prefill GPU table keeps its columns", "[tables]") {
  check_columns(prefill_gpu_table().columns(), prefill_case_and({{"median_ms", "median ms", 4},
                                                                 {"min_ms", "min ms", 4},
                                                                 {"max_ms", "max ms", 4},
                                                                 {"rel_std", "rel.std", 2},
                                                                 {"reps", "reps", 3},
                                                                 {"tops", "TOPS", 4},
                                                                 {"thpt_ktok_s", "K tok/s", 4},
                                                                 {"speedup_vs_flash", "x flash", 3},
                                                                 {"route_ms", "route ms", 4},
                                                                 {"quant_ms", "quant ms", 4},
                                                                 {"resident_mib", "HBM MiB", 4},
                                                                 {"resident_measured_mib", "HBM MiB meas.", 4},
                                                                 {"rel_l2_vs_flash", "rel.L2 flash", 3},
                                                                 {"rel_l2_vs_ref", "rel.L2 ref", 3},
                                                                 {"sm_clock_mhz", "SM MHz", 3},
                                                                 {"gpu", "gpu", 3},
                                                                 {"status", "status", 3}}));
}

TEST_CASE("the decode GPU table keeps its columns", "[tables]") {
  check_columns(decode_gpu_table().columns(), {{"case", "case", 3},
                                               {"method", "method", 3},
                                               {"cache_dtype", "cache", 3},
                                               {"layout", "layout", 3},
                                               {"ratio", "ratio", 3},
                                               {"coverage", "cov.groups", 3},
                                               {"params", "params", 3},
                                               {"batch", "B", 3},
                                               {"hq", "Hq", 3},
                                               {"hk", "Hk", 3},
                                               {"d", "d", 3},
                                               {"cache_len", "L", 3},
                                               {"new_tokens", "new", 3},
                                               {"mainloop", "mainloop", 3},
                                               {"routes", "routes", 3},
                                               {"combine", "combine", 3},
                                               {"splits", "splits", 3},
                                               {"median_ms", "median ms", 4},
                                               {"min_ms", "min ms", 4},
                                               {"max_ms", "max ms", 4},
                                               {"rel_std", "rel.std", 2},
                                               {"reps", "reps", 3},
                                               {"gbps", "GB/s", 4},
                                               {"copy_gbps", "copy GB/s", 4},
                                               {"pct_of_copy", "% copy", 3},
                                               {"speedup_vs_fp16_cache", "x fp16 cache", 3},
                                               {"append_ms", "append ms", 4},
                                               {"resident_mib", "HBM MiB", 4},
                                               {"resident_measured_mib", "HBM MiB meas.", 4},
                                               {"sm_clock_mhz", "SM MHz", 3},
                                               {"gpu", "gpu", 3},
                                               {"status", "status", 3}});
}

TEST_CASE("the model and emulator tables keep their columns", "[tables]") {
  check_columns(model_table().columns(), prefill_case_and({{"layers", "layers", 3},
                                                           {"vocab", "vocab", 3},
                                                           {"reference", "reference", 3},
                                                           {"max_abs_logit_ref", "max|logit| ref", 4},
                                                           {"max_abs_dev", "max|dev|", 3},
                                                           {"mean_abs_dev", "mean|dev|", 3},
                                                           {"seconds", "seconds", 3},
                                                           {"status", "status", 3}}));
  check_columns(emulator_table().columns(), prefill_case_and({{"cpu_ms", "cpu ms", 4},
                                                              {"max_abs_vs_ref", "max|d| ref", 3},
                                                              {"rel_l2_vs_ref", "rel.L2 ref", 3},
                                                              {"cosine_vs_ref", "cos ref", 7},
                                                              {"hh_exposure", "hh INT8 5/10/20/30%", 3}}));
}

TEST_CASE("a config with compare_with adds the comparison's columns, in place", "[tables]") {
  const std::vector<Expected> comparison = {{"compared_with", "compared with", 3},
                                            {"max_abs_vs_compared", "max|d| cmp", 3},
                                            {"mean_abs_vs_compared", "mean|d| cmp", 3},
                                            {"rel_l2_vs_compared", "rel.L2 cmp", 3}};
  // Each table with the comparison is the plain one with the four columns inserted after its
  // deviation columns.
  const auto with_comparison_after = [&](const std::vector<Column>& plain, const std::string& key) {
    std::vector<Expected> expected;
    for (const Column& c : plain) {
      expected.push_back({c.key.c_str(), c.header.c_str(), c.precision});
      if (c.key == key) expected.insert(expected.end(), comparison.begin(), comparison.end());
    }
    return expected;
  };
  check_columns(prefill_gpu_table(true).columns(), with_comparison_after(prefill_gpu_table().columns(), "rel_l2_vs_ref"));
  check_columns(emulator_table(true).columns(), with_comparison_after(emulator_table().columns(), "cosine_vs_ref"));

  const auto parse = [](const std::string& text) {
    return parse_config(nlohmann::ordered_json::parse(text), "t.json");
  };
  CHECK_FALSE(compares(parse(R"({"cases": [{"seq_len": 64}]})")));
  CHECK(compares(parse(R"({"cases": [{"seq_len": 64}, {"seq_len": 64, "name": "c",
                                      "compare_with": {"method": "torch_like"}}]})")));
}

TEST_CASE("emulator rows show the deviation from the compared run, or leave its cells empty", "[tables]") {
  const CaseSpec spec = parse_case(R"({"cases": [{"name": "c", "seq_len": 256, "layout": "band", "ratio": 0.5,
                                                   "compare_with": {"layout": "zero"}}]})");
  const RoutingPlan plan = make_plan(spec.shape, spec.routing, spec.where);
  const Deviation vs_ref{0.5, 0.01, 0.02, 0.999, 0, 100, 0};
  const HeavyHitterExposure hh{{0.05, 0.1, 0.2, 0.3}, {0.1, 0.2, 0.3, 0.4}};
  const TableLayout<EmulatorRow>& table = emulator_table(true);
  EmulatorRow row{{spec, "emulator", true, &plan}, 12.0, vs_ref, hh};
  row.compared = ComparedDeviation{"tilemix layout=zero", Deviation{0.25, 0.005, 0.0125, 0.9999, 0, 100, 0}};
  const std::vector<Cell> compared = table.cells(row);
  CHECK(cell(table, compared, "compared_with") == Cell{std::string("tilemix layout=zero")});
  CHECK(cell(table, compared, "max_abs_vs_compared") == Cell{0.25});
  CHECK(cell(table, compared, "mean_abs_vs_compared") == Cell{0.005});
  CHECK(cell(table, compared, "rel_l2_vs_compared") == Cell{0.0125});
  CHECK(cell(table, compared, "max_abs_vs_ref") == Cell{0.5});

  // The compared run could not run: its label stays, the deviation cells are empty.
  row.compared = ComparedDeviation{"torch_like: OOM (9.0 GiB asked)", std::nullopt};
  const std::vector<Cell> missing = table.cells(row);
  CHECK(cell(table, missing, "compared_with") == Cell{std::string("torch_like: OOM (9.0 GiB asked)")});
  CHECK(empty(cell(table, missing, "max_abs_vs_compared")));
  CHECK(empty(cell(table, missing, "mean_abs_vs_compared")));
  // A case without compare_with in a config that has some: every comparison cell is empty.
  row.compared.reset();
  CHECK(empty(cell(table, table.cells(row), "compared_with")));
}

TEST_CASE("the check table keeps its columns", "[tables]") {
  check_columns(check_table().columns(), {{"case", "case", 3},
                                          {"layout", "layout", 3},
                                          {"ratio", "ratio", 3},
                                          {"coverage_groups", "cov.groups", 3},
                                          {"coverage_tiles", "cov.tiles", 3},
                                          {"coverage_cells", "cov.cells", 3},
                                          {"shape", "shape", 3},
                                          {"input", "input", 3},
                                          {"state", "state", 3},
                                          {"accum", "accum", 3},
                                          {"mode", "mode", 3},
                                          {"smooth_k", "smooth_k", 3},
                                          {"pv", "pv", 3},
                                          {"compare", "compare", 3},
                                          {"max_abs", "max|d|", 3},
                                          {"mean_abs", "mean|d|", 3},
                                          {"rel_l2", "rel.L2", 3},
                                          {"cosine", "cosine", 7},
                                          {"nonfinite", "nan/inf", 3},
                                          {"status", "status", 3},
                                          {"why", "why", 3}});
}

TEST_CASE("prefill GPU rows: routing cells for the routed kernel only, timing cells when it ran", "[tables]") {
  const CaseSpec spec = parse_case(R"({"cases": [{"name": "c", "seq_len": 256, "layout": "band", "ratio": 0.5}]})");
  const RoutingPlan plan = make_plan(spec.shape, spec.routing, spec.where);
  const gpu::TimingResult flash = timing(2.0), routed = timing(1.0);
  const TableLayout<PrefillGpuRow>& table = prefill_gpu_table();

  const gpu::TimingResult route = timing(0.125);
  const std::vector<Cell> tilemix = table.cells({{spec, "tilemix", true, &plan},
                                                 {&routed, 3, "ok"},
                                                 4e9,
                                                 256.0,
                                                 &flash,
                                                 {1 << 20, 2 << 20},
                                                 0.25,
                                                 {},
                                                 {},
                                                 &route,
                                                 0.0625});
  CHECK(cell(table, tilemix, "method") == Cell{std::string("tilemix")});
  CHECK(cell(table, tilemix, "layout") == Cell{std::string("band")});
  CHECK(cell(table, tilemix, "coverage") == Cell{plan.coverage.groups()});
  CHECK(cell(table, tilemix, "mode") == Cell{std::string("quantize_once")});
  CHECK(cell(table, tilemix, "smooth_k") == Cell{false});
  CHECK(cell(table, tilemix, "pv") == Cell{std::string("fp16")});
  CHECK(cell(table, tilemix, "lq") == Cell{int64_t{256}});
  CHECK(cell(table, tilemix, "reps") == Cell{int64_t{3}});
  CHECK(cell(table, tilemix, "tops") == Cell{4e9 / (1.0 * 1e-3) / 1e12});
  CHECK(cell(table, tilemix, "speedup_vs_flash") == Cell{2.0});
  CHECK(cell(table, tilemix, "route_ms") == Cell{0.125});
  CHECK(cell(table, tilemix, "quant_ms") == Cell{0.0625});
  CHECK(cell(table, tilemix, "resident_measured_mib") == Cell{2.0});
  CHECK(cell(table, tilemix, "rel_l2_vs_flash") == Cell{0.25});
  CHECK(empty(cell(table, tilemix, "rel_l2_vs_ref")));
  CHECK(cell(table, tilemix, "sm_clock_mhz") == Cell{int64_t{1980}});
  CHECK(cell(table, tilemix, "gpu") == Cell{int64_t{3}});

  // A baseline that did not run: no routing and no timing, but its residency and status.
  const std::vector<Cell> oom = table.cells({{spec, "torch_like", false, &plan},
                                             {nullptr, 0, "OOM (9.0 GiB asked)"},
                                             4e9,
                                             256.0,
                                             &flash,
                                             {5 << 20, 6 << 20},
                                             std::nullopt,
                                             std::nullopt,
                                             std::nullopt,
                                             nullptr,
                                             std::nullopt});
  for (const char* key : {"layout", "ratio", "coverage", "coverage_tiles", "coverage_cells", "params", "mode",
                          "smooth_k", "pv", "median_ms", "reps", "tops", "speedup_vs_flash", "route_ms", "quant_ms",
                          "sm_clock_mhz"}) {
    INFO(key);
    CHECK(empty(cell(table, oom, key)));
  }
  CHECK(cell(table, oom, "state") == Cell{std::string("fp32")});
  CHECK(cell(table, oom, "resident_mib") == Cell{5.0});
  CHECK(cell(table, oom, "status") == Cell{std::string("OOM (9.0 GiB asked)")});
}

TEST_CASE("decode GPU rows: a skipped shape keeps its description and the copy bandwidth", "[tables]") {
  const CaseSpec spec = parse_case(
      R"({"cases": [{"name": "d", "kind": "decode", "cache_lens": [64, 64], "new_tokens": 4, "layout": "band",
          "ratio": 0.5}]})");
  const TableLayout<DecodeGpuRow>& table = decode_gpu_table();
  const CaseRow unplanned{spec, "tilemix", true, nullptr};
  const DecodeGpuRow skipped_row{
      unplanned, CacheKind::int8, "mma_sync", "",     "", 7, {nullptr, 1, "skipped (needs 200.0 GiB of 139.8)"},
      nullptr,   nullptr,         0,          4000.0, {}};
  const std::vector<Cell> skipped = table.cells(skipped_row);
  CHECK(cell(table, skipped, "cache_dtype") == Cell{std::string("int8")});
  CHECK(cell(table, skipped, "layout") == Cell{std::string("band")});
  CHECK(cell(table, skipped, "ratio") == Cell{0.5});
  CHECK(cell(table, skipped, "batch") == Cell{int64_t{2}});
  CHECK(cell(table, skipped, "cache_len") == Cell{int64_t{64}});
  CHECK(cell(table, skipped, "new_tokens") == Cell{int64_t{4}});
  CHECK(cell(table, skipped, "mainloop") == Cell{std::string("mma_sync")});
  CHECK(cell(table, skipped, "copy_gbps") == Cell{4000.0});
  for (const char* key : {"coverage", "params", "routes", "combine", "splits", "median_ms", "gbps", "pct_of_copy",
                          "speedup_vs_fp16_cache", "append_ms", "resident_mib", "sm_clock_mhz"}) {
    INFO(key);
    CHECK(empty(cell(table, skipped, key)));
  }

  const RoutingPlan plan = make_plan(spec.shape, spec.routing, spec.where);
  const gpu::TimingResult decode = timing(0.5), append = timing(0.01), base = timing(1.0);
  const CaseRow planned{spec, "tilemix", true, &plan};
  const DecodeGpuRow ran_row{planned, CacheKind::int8,    "wgmma", "mixed", "grid",
                             7,       {&decode, 1, "ok"}, &append, &base,   int64_t{1} << 30,
                             4000.0,  {3 << 20, 4 << 20}};
  const std::vector<Cell> ran = table.cells(ran_row);
  const double gbps = static_cast<double>(int64_t{1} << 30) / (0.5 * 1e-3) / 1e9;
  CHECK(cell(table, ran, "coverage") == Cell{plan.coverage.groups()});
  CHECK(cell(table, ran, "routes") == Cell{std::string("mixed")});
  CHECK(cell(table, ran, "splits") == Cell{int64_t{7}});
  CHECK(cell(table, ran, "gbps") == Cell{gbps});
  CHECK(cell(table, ran, "pct_of_copy") == Cell{100.0 * gbps / 4000.0});
  CHECK(cell(table, ran, "speedup_vs_fp16_cache") == Cell{2.0});
  CHECK(cell(table, ran, "append_ms") == Cell{0.01});
  CHECK(cell(table, ran, "resident_mib") == Cell{3.0});
}
